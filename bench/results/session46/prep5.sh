#!/usr/bin/env bash
# Call 5's carry (build-s46): the tree's library and test_prefill_cuda (build-gpu: scripts/build_gpu.sh
# first on a fresh checkout).
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_prefill_cuda > /dev/null
rm -rf build-s46 && mkdir -p build-s46
cp build-gpu/libflashserve_c.so build-gpu/tests/test_prefill_cuda build-s46/
strip --strip-unneeded build-s46/*.so build-s46/test_prefill_cuda
du -sh build-s46
