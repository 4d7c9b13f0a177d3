#!/usr/bin/env bash
# Session 43's call 3 carry, rebuilt from the tree (for session 44 on a fresh checkout: first
# scripts/setup.sh, scripts/build_gpu.sh, bench/sass_tools.sh): build-s43b/ = build-gpu's library,
# pb2/ (the paged 128-key instances and prefill_cuda.cu with FLASHSERVE_PREFILL_WS_PAGE_BOXES=1,
# with its test_prefill_cuda), gd4/ (d 128's paged bf16 instances with GATHER_DIAG=4) and pv/ (d
# 128's packed bf16 no-transform instances with GATHER_DIAG=5: V's TMA boxes skipped), stripped.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_prefill_cuda > /dev/null
rm -rf build-s43b && mkdir -p build-s43b/pb2 build-s43b/gd4 build-s43b/pv
cp build-gpu/libflashserve_c.so build-s43b/
S=$(ls attention/cuda/prefill_sm90_ws_hd{128,64,64m128}_{bf16,fp16}_paged{,_transform}.cu)
VARIANT_TESTS=test_prefill_cuda bash bench/variant_lib.sh pb2 "-DFLASHSERVE_PREFILL_WS_PAGE_BOXES=1" $S \
  attention/cuda/prefill_cuda.cu > /dev/null
cp build-var/pb2/libflashserve_c.so build-var/pb2/tests/test_prefill_cuda build-s43b/pb2/
bash bench/variant_lib.sh gd4 "-DFLASHSERVE_PREFILL_WS_GATHER_DIAG=4" attention/cuda/prefill_sm90_ws_hd128{,n176}_bf16_paged.cu > /dev/null
cp build-var/gd4/libflashserve_c.so build-s43b/gd4/
bash bench/variant_lib.sh pv "-DFLASHSERVE_PREFILL_WS_GATHER_DIAG=5" attention/cuda/prefill_sm90_ws_hd128{,n176}_bf16.cu > /dev/null
cp build-var/pv/libflashserve_c.so build-s43b/pv/
strip --strip-unneeded build-s43b/*.so build-s43b/*/*
du -sh build-s43b
