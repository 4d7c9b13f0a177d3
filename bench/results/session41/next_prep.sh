#!/usr/bin/env bash
# Session 42's first call (issue 22), prepared in session 41: build-s42/ from build-gpu (the tree,
# v4.32) and hpv/, d 128's packed 128-key instances (both logit forms) with
# FLASHSERVE_PREFILL_WS_HALF_PV=1 (the half tile's last P·V at 4 k-steps: ptxas injects two
# warpgroup arrives in the drain, C7519, but serializes nothing else), with its test_prefill_cuda.
set -euo pipefail
cd "$(dirname "$0")/../../.."
S=(attention/cuda/prefill_sm90_ws_hd128_{bf16,fp16}{,_transform}.cu)
bash bench/variant_pack.sh build-s42 hpv "-DFLASHSERVE_PREFILL_WS_HALF_PV=1" "${S[@]}"
