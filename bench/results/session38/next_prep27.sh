#!/usr/bin/env bash
# Issue 27's H200 table (prepared in session 38; for a session whose issue-22 call is done and an
# H200 is held): the server, the load client and bench_model built for sm_90a in build-gpu, then
# packed with the shared libraries the GPU machine lacks (scripts/gpu_pack.sh -> build-gpu/pack).
set -euo pipefail
cd "$(dirname "$0")/../../.."
bash scripts/build_gpu.sh > /dev/null
cmake --build build-gpu --parallel 2 --target flashserve_server flashserve_bench bench_model > /dev/null
PACK_LEAN=1 bash scripts/gpu_pack.sh build-gpu/pack  # (the whole pack, 97 MB, is over a call's carry)
