#!/usr/bin/env bash
# Session 45 call 4's carry (issue 22): build-s45b/ = build-gpu's library and test_prefill_cuda
# (the tree with d 64's 128-row tile for non-causal calls of <= 1024 queries a sequence), old/ =
# build-s45a's library (bcc803c: the page boxes' instances, d 64's old rule; ws SASS the same).
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_prefill_cuda > /dev/null
rm -rf build-s45b && mkdir -p build-s45b/old
cp build-gpu/libflashserve_c.so build-gpu/tests/test_prefill_cuda build-s45b/
cp build-s45a/libflashserve_c.so build-s45b/old/
strip --strip-unneeded build-s45b/libflashserve_c.so build-s45b/test_prefill_cuda
du -sh build-s45b
