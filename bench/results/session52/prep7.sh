#!/usr/bin/env bash
# Call 7's carry: build-s52y/b.tar.xz, which unpacks to build-s52/: the tree's library and GPU tests
# (v4.37's kernels; the host's rule: captured packed calls of differing q lengths on the static
# persistent walk).
set -euo pipefail
cd "$(dirname "$0")/../../.."
cmake --build build-gpu --target flashserve_c test_prefill_cuda test_fp8_cuda > /dev/null
rm -rf build-s52 && mkdir -p build-s52
cp build-gpu/libflashserve_c.so build-gpu/tests/test_prefill_cuda build-gpu/tests/test_fp8_cuda build-s52/
strip --strip-unneeded build-s52/*.so build-s52/test_*
rm -rf build-s52y && mkdir build-s52y && tar cJf build-s52y/b.tar.xz build-s52
du -sh build-s52 build-s52y
