#!/usr/bin/env bash
# Session 41 call 2 (issue 22): build-s41b/ from build-gpu (the tree: v4.31, main's SASS, md5) and
# half/, every d 64 and d 128 128-key 16-bit instance (both logit forms, packed and pages) with
# FLASHSERVE_PREFILL_WS_HALF_DIAG=1 (the last tile at 64 keys where a warpgroup sees no further),
# with its test_prefill_cuda.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_prefill_cuda > /dev/null
S=(attention/cuda/prefill_sm90_ws_hd64{,m128}_{bf16,fp16}{,_paged}{,_transform}.cu
   attention/cuda/prefill_sm90_ws_hd128_{bf16,fp16}{,_paged}{,_transform}.cu)
VARIANT_TESTS=test_prefill_cuda bash bench/variant_lib.sh half "-DFLASHSERVE_PREFILL_WS_HALF_DIAG=1" "${S[@]}" > /dev/null
rm -rf build-s41b && mkdir -p build-s41b/half
cp build-gpu/libflashserve_c.so build-s41b/
cp build-var/half/libflashserve_c.so build-var/half/tests/test_prefill_cuda build-s41b/half/
strip --strip-unneeded build-s41b/*.so build-s41b/half/*
du -sh build-s41b
