#!/usr/bin/env bash
# Session 41 call 8 (issue 22): build-s41d/ from build-gpu (the tree: v4.32) and kbox/, the paged
# 16-bit instances of d 64 and d 128 (both logit forms, both tiles) and prefill_cuda.cu with
# FLASHSERVE_PREFILL_WS_PAGE_K_TMA=1 (K by 16-row page boxes, V by the row gather), with its
# test_prefill_cuda.
set -euo pipefail
cd "$(dirname "$0")/../../.."
S=(attention/cuda/prefill_cuda.cu
   attention/cuda/prefill_sm90_ws_hd64{,m128}_{bf16,fp16}_paged{,_transform}.cu
   attention/cuda/prefill_sm90_ws_hd128{,n176}_{bf16,fp16}_paged{,_transform}.cu)
bash bench/variant_pack.sh build-s41d kbox "-DFLASHSERVE_PREFILL_WS_PAGE_K_TMA=1" "${S[@]}"
