#!/usr/bin/env bash
# Session 41's first call (issue 22), prepared in session 40: build-s41/ from build-gpu (the tree,
# v4.31) and desc/, the d 64 and d 128 16-bit instances (both logit forms, packed and pages, both
# tiles) with FLASHSERVE_PREFILL_WS_ITEM_DESC=1 (the item's view from the producer), with its
# test_prefill_cuda. Written, compiled, not run in session 40.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_prefill_cuda > /dev/null
S=(attention/cuda/prefill_sm90_ws_hd64{,m128}_{bf16,fp16}{,_paged}{,_transform}.cu
   attention/cuda/prefill_sm90_ws_hd128{,n176}_{bf16,fp16}{,_paged}{,_transform}.cu)
VARIANT_TESTS=test_prefill_cuda bash bench/variant_lib.sh desc "-DFLASHSERVE_PREFILL_WS_ITEM_DESC=1" "${S[@]}" > /dev/null
rm -rf build-s41 && mkdir -p build-s41/desc
cp build-gpu/libflashserve_c.so build-s41/
cp build-var/desc/libflashserve_c.so build-var/desc/tests/test_prefill_cuda build-s41/desc/
strip --strip-unneeded build-s41/*.so build-s41/desc/*
du -sh build-s41
