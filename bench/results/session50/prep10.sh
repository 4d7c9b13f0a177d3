#!/usr/bin/env bash
# Call 10's carry: build-s50x/b.tar.xz, which unpacks to build-s50/: the tree's library and GPU
# tests (build-gpu, current), v4.35's library (build-s46) in v435/, build-l2h's in l2h/.
set -euo pipefail
cd "$(dirname "$0")/../../.."
cmake --build build-gpu --target flashserve_c test_prefill_cuda test_decode_cuda test_fp8_cuda > /dev/null
rm -rf build-s50 && mkdir -p build-s50/v435 build-s50/l2h
cp build-gpu/libflashserve_c.so build-gpu/tests/test_prefill_cuda build-gpu/tests/test_decode_cuda build-gpu/tests/test_fp8_cuda build-s50/
cp build-s46/libflashserve_c.so build-s50/v435/
cp build-l2h/libflashserve_c.so build-s50/l2h/
strip --strip-unneeded build-s50/*.so build-s50/test_* build-s50/*/*.so
rm -rf build-s50x && mkdir build-s50x && tar cJf build-s50x/b.tar.xz build-s50
du -sh build-s50 build-s50x
