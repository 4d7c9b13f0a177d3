#!/usr/bin/env bash
# Call 4's carry, build-s54p/b.tar.xz (unpacks to build-s54z/): the tree's library and GPU tests
# (the prefill kernels' SASS v4.39's, md5) and zz/, the library, test_prefill_cuda and test_fp8_cuda with every
# ws instance built with -DFLASHSERVE_PREFILL_WS_ZIGZAG=1 (bench/variant_lib.sh): the static walk
# over causal rows of one length by WsWorkOrder's zigzag order.
set -euo pipefail
cd "$(dirname "$0")/../../.."
cmake --build build-gpu --target flashserve_c test_prefill_cuda test_fp8_cuda > /dev/null
VARIANT_TESTS="test_prefill_cuda test_fp8_cuda" bash bench/variant_lib.sh zz "-DFLASHSERVE_PREFILL_WS_ZIGZAG=1" \
  $(ls attention/cuda/prefill_sm90_ws_*.cu) > /dev/null
rm -rf build-s54z && mkdir -p build-s54z/zz
cp build-gpu/libflashserve_c.so build-gpu/tests/test_prefill_cuda build-gpu/tests/test_fp8_cuda build-s54z/
cp build-var/zz/libflashserve_c.so build-var/zz/tests/test_prefill_cuda build-var/zz/tests/test_fp8_cuda build-s54z/zz/
strip --strip-unneeded build-s54z/*.so build-s54z/test_* build-s54z/zz/*
rm -rf build-s54p && mkdir build-s54p && tar cJf build-s54p/b.tar.xz build-s54z
du -sh build-s54z build-s54p
