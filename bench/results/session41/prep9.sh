#!/usr/bin/env bash
# Session 41 call 9 (issue 22): build-s41e/ from build-gpu (the tree: v4.32) and idle/, every d 64
# and d 128 16-bit ws instance (both tiles, packed and pages, both logit forms) with
# FLASHSERVE_PREFILL_WS_IDLE_WG=1 (a warpgroup without rows in an item issues nothing), with its
# test_prefill_cuda.
set -euo pipefail
cd "$(dirname "$0")/../../.."
S=(attention/cuda/prefill_sm90_ws_hd64{,m128}_{bf16,fp16}{,_paged}{,_transform}.cu
   attention/cuda/prefill_sm90_ws_hd128{,n176}_{bf16,fp16}{,_paged}{,_transform}.cu)
bash bench/variant_pack.sh build-s41e idle "-DFLASHSERVE_PREFILL_WS_IDLE_WG=1" "${S[@]}"
