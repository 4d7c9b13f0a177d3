#!/usr/bin/env bash
# Session 41 call 2 (issue 22): build-s41b/ from build-gpu (the tree: v4.31, main's SASS, md5) and
# half/, every d 64 and d 128 128-key 16-bit instance (both logit forms, packed and pages) with
# FLASHSERVE_PREFILL_WS_HALF_DIAG=1 (the last tile at 64 keys where a warpgroup sees no further),
# with its test_prefill_cuda.
set -euo pipefail
cd "$(dirname "$0")/../../.."
S=(attention/cuda/prefill_sm90_ws_hd64{,m128}_{bf16,fp16}{,_paged}{,_transform}.cu
   attention/cuda/prefill_sm90_ws_hd128_{bf16,fp16}{,_paged}{,_transform}.cu)
bash bench/variant_pack.sh build-s41b half "-DFLASHSERVE_PREFILL_WS_HALF_DIAG=1" "${S[@]}"
