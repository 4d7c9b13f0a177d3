#!/usr/bin/env bash
# Session 41 call 3 (issue 22): build-s41c/ from build-gpu (the tree, main's SASS) and half128/,
# d 128's packed 128-key instances (both logit forms) with FLASHSERVE_PREFILL_WS_HALF_DIAG=1 (their
# SASS call 2's half, md5), with its test_prefill_cuda for the sanitizers.
set -euo pipefail
cd "$(dirname "$0")/../../.."
S=(attention/cuda/prefill_sm90_ws_hd128_{bf16,fp16}{,_transform}.cu)
bash bench/variant_pack.sh build-s41c half128 "-DFLASHSERVE_PREFILL_WS_HALF_DIAG=1" "${S[@]}"
