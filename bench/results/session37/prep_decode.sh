#!/usr/bin/env bash
# Session 37's decode call (issue 25, the FP8 persistent kernel): build-dec/ (~27 MB) from
# build-gpu (the tree, with decode_kernel.cuh's shared device functions), build-var/persist
# (bench/variant_lib.sh: the 8 FP8 decode objects with -DFLASHSERVE_DECODE_FP8_PERSISTENT=1, and
# its test_fp8_cuda) and build-call/ (session 36's prep_call3.sh: HEAD 6830482's library, the
# decode kernel as measured before this session: the A/B's base). BASE=build-gpu takes the tree's
# library as the base instead (session 38: its decode objects were session 37's measured ones).
# (The persistent kernel was removed in session 38, after its H200 run: the switch is gone, so
# the persist variant now builds the per-item kernel.)
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_fp8_cuda tests/test_decode_cuda > /dev/null
VARIANT_TESTS="test_fp8_cuda" bash bench/variant_lib.sh persist "-DFLASHSERVE_DECODE_FP8_PERSISTENT=1" \
  decode/cuda/decode_hd{64,128}_{bf16,fp16}_{e4m3,e5m2}.cu > /dev/null
rm -rf build-dec && mkdir -p build-dec/persist build-dec/base
cp build-gpu/tests/test_fp8_cuda build-gpu/tests/test_decode_cuda build-dec/
cp build-var/persist/libflashserve_c.so build-var/persist/tests/test_fp8_cuda build-dec/persist/
cp "${BASE:-build-call}"/libflashserve_c.so build-dec/base/
strip --strip-unneeded build-dec/*/*.so build-dec/test_* build-dec/persist/test_*
du -sh build-dec
