#!/usr/bin/env bash
# Call 2's carry: build-s51x/b.tar.xz, which unpacks to build-s51/: the tree's library and GPU
# tests (build-gpu, current; call 2 ran the build of f423b2d: d 64's 64-row tile forced only, the L2 hints' default 2).
set -euo pipefail
cd "$(dirname "$0")/../../.."
cmake --build build-gpu --target flashserve_c test_prefill_cuda test_fp8_cuda > /dev/null
rm -rf build-s51 && mkdir -p build-s51
cp build-gpu/libflashserve_c.so build-gpu/tests/test_prefill_cuda build-gpu/tests/test_fp8_cuda build-s51/
strip --strip-unneeded build-s51/*.so build-s51/test_*
rm -rf build-s51x && mkdir build-s51x && tar cJf build-s51x/b.tar.xz build-s51
du -sh build-s51 build-s51x
