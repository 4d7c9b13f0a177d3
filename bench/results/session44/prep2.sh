#!/usr/bin/env bash
# Session 44 call 2's carry (issue 22): build-s44a/ = build-gpu's library (the tree), pb3/ = the
# paged instances and prefill_cuda.cu built with FLASHSERVE_PREFILL_WS_PAGE_BOXES=1 (the producer's
# walk in two loops, boxes and row gather, so the gather's tile loop is the tree's: 218
# instructions and 10 local loads at d 128 against pb2's 224 / 12), with its test_prefill_cuda.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_prefill_cuda > /dev/null
rm -rf build-s44a && mkdir -p build-s44a/pb3
cp build-gpu/libflashserve_c.so build-s44a/
S=$(ls attention/cuda/prefill_sm90_ws_hd{128,64,64m128}_{bf16,fp16}_paged{,_transform}.cu)
VARIANT_TESTS=test_prefill_cuda bash bench/variant_lib.sh pb3 "-DFLASHSERVE_PREFILL_WS_PAGE_BOXES=1" $S \
  attention/cuda/prefill_cuda.cu > /dev/null
cp build-var/pb3/libflashserve_c.so build-var/pb3/tests/test_prefill_cuda build-s44a/pb3/
strip --strip-unneeded build-s44a/*.so build-s44a/*/*
du -sh build-s44a
