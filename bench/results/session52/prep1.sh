#!/usr/bin/env bash
# Call 1's carry: build-s52x/b.tar.xz, which unpacks to build-s52/: the tree's library and GPU
# tests (build-gpu, current: prefill v4.38, d 64's 64-row tile carrying the next item's S(0)).
# Session 51's build-s51x (v4.37, its prep2.sh) rides along as the A/B's old library.
set -euo pipefail
cd "$(dirname "$0")/../../.."
cmake --build build-gpu --target flashserve_c test_prefill_cuda test_fp8_cuda > /dev/null
rm -rf build-s52 && mkdir -p build-s52
cp build-gpu/libflashserve_c.so build-gpu/tests/test_prefill_cuda build-gpu/tests/test_fp8_cuda build-s52/
strip --strip-unneeded build-s52/*.so build-s52/test_*
rm -rf build-s52x && mkdir build-s52x && tar cJf build-s52x/b.tar.xz build-s52
du -sh build-s52 build-s52x
