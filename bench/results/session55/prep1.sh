#!/usr/bin/env bash
# Call 1's carry, build-s55p/b.tar.xz (unpacks to build-s55a/): the library, test_prefill_cuda and
# test_fp8_cuda with every ws instance and prefill_cuda.cu built with
# -DFLASHSERVE_PREFILL_WS_ZIGZAG=1 (bench/variant_lib.sh): prefill v4.40's candidate, captured
# calls on the persistent static walk, causal rows by zigzag units. (The tree's default build:
# the prefill kernels' SASS v4.39's, md5.)
set -euo pipefail
cd "$(dirname "$0")/../../.."
cmake --build build-gpu --target flashserve_c test_prefill_cuda test_fp8_cuda > /dev/null
VARIANT_TESTS="test_prefill_cuda test_fp8_cuda" bash bench/variant_lib.sh zz55 "-DFLASHSERVE_PREFILL_WS_ZIGZAG=1" \
  attention/cuda/prefill_cuda.cu $(ls attention/cuda/prefill_sm90_ws_*.cu) > /dev/null
rm -rf build-s55a && mkdir -p build-s55a
cp build-var/zz55/libflashserve_c.so build-var/zz55/tests/test_prefill_cuda build-var/zz55/tests/test_fp8_cuda build-s55a/
strip --strip-unneeded build-s55a/*
rm -rf build-s55p && mkdir build-s55p && tar cJf build-s55p/b.tar.xz build-s55a
du -sh build-s55a build-s55p
