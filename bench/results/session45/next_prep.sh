#!/usr/bin/env bash
# Next session's first call's carry (issue 22): build-s45c/ = build-gpu's library and
# test_prefill_cuda (the tree: v4.34), pr/ = the page boxes' instances and prefill_cuda.cu built
# with -DFLASHSERVE_PREFILL_WS_PAGE_RUNS=1 (TMA boxes over a tile's run of 16-64-token pages;
# prefill_cuda.h), with its test_prefill_cuda.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_prefill_cuda > /dev/null
rm -rf build-s45c && mkdir -p build-s45c/pr
cp build-gpu/libflashserve_c.so build-gpu/tests/test_prefill_cuda build-s45c/
S=$(ls attention/cuda/prefill_sm90_ws_hd{128,64,64m128}_{bf16,fp16}_paged_boxes.cu)
VARIANT_TESTS=test_prefill_cuda bash bench/variant_lib.sh pr "-DFLASHSERVE_PREFILL_WS_PAGE_RUNS=1" $S \
  attention/cuda/prefill_cuda.cu > /dev/null
cp build-var/pr/libflashserve_c.so build-var/pr/tests/test_prefill_cuda build-s45c/pr/
strip --strip-unneeded build-s45c/*.so build-s45c/test_prefill_cuda build-s45c/pr/*
du -sh build-s45c
