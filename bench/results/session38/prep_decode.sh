#!/usr/bin/env bash
# Session 38's decode call (issue 25, the FP8 persistent kernel on an H200): build-dec/ (~27 MB)
# from build-gpu (the tree: its decode objects are the per-item kernel measured in session 37's
# call 2, md5, and serve as the A/B's base) and build-var/persist (bench/variant_lib.sh: the 8
# FP8 decode objects with -DFLASHSERVE_DECODE_FP8_PERSISTENT=1, and its test_fp8_cuda).
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_fp8_cuda tests/test_decode_cuda > /dev/null
VARIANT_TESTS="test_fp8_cuda" bash bench/variant_lib.sh persist "-DFLASHSERVE_DECODE_FP8_PERSISTENT=1" \
  decode/cuda/decode_hd{64,128}_{bf16,fp16}_{e4m3,e5m2}.cu > /dev/null
rm -rf build-dec && mkdir -p build-dec/persist build-dec/base
cp build-gpu/tests/test_fp8_cuda build-gpu/tests/test_decode_cuda build-dec/
cp build-var/persist/libflashserve_c.so build-var/persist/tests/test_fp8_cuda build-dec/persist/
cp build-gpu/libflashserve_c.so build-dec/base/
strip --strip-unneeded build-dec/*/*.so build-dec/test_* build-dec/persist/test_*
du -sh build-dec
