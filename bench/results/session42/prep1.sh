#!/usr/bin/env bash
# Session 42, issue 22: build-s42b/ from build-gpu (the tree) and grp/, d 128's paged 16-bit
# instances (both key tiles, both logit forms) with FLASHSERVE_PREFILL_WS_GROUPED=1 (grouped K/V
# stages: the row gather into them, or 16-token page chunks as 4 KB TMA boxes where
# FLASHSERVE_PREFILL_WS_PAGE_TMA=1), with its test_prefill_cuda.
set -euo pipefail
cd "$(dirname "$0")/../../.."
S=(attention/cuda/prefill_sm90_ws_hd128{,n176}_{bf16,fp16}_paged{,_transform}.cu)
bash bench/variant_pack.sh build-s42b grp "-DFLASHSERVE_PREFILL_WS_GROUPED=1" "${S[@]}"
