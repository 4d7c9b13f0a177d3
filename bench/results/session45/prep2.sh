#!/usr/bin/env bash
# Session 45 call 2's carry (issue 22): build-s45a/ = build-gpu's library and test_prefill_cuda
# (the tree: TMA page boxes in instances of their own, WsKv::kPageBoxes), old/ = bb48ab8's library
# (session 44's tree: the row gather for every page size; build-s44a's, from session 44's prep2.sh).
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_prefill_cuda > /dev/null
rm -rf build-s45a && mkdir -p build-s45a/old
cp build-gpu/libflashserve_c.so build-gpu/tests/test_prefill_cuda build-s45a/
cp build-s44a/libflashserve_c.so build-s45a/old/
strip --strip-unneeded build-s45a/libflashserve_c.so build-s45a/test_prefill_cuda
du -sh build-s45a
