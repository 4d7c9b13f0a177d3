#!/usr/bin/env bash
# build-s40d/ for call5.sh (the landing library and its test_prefill_cuda) and build-peers/ (the
# same library, for session37/call_peers.sh).
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_prefill_cuda > /dev/null
rm -rf build-s40d build-peers && mkdir -p build-s40d build-peers
cp build-gpu/libflashserve_c.so build-gpu/tests/test_prefill_cuda build-s40d/
cp build-gpu/libflashserve_c.so build-peers/
strip --strip-unneeded build-s40d/* build-peers/*
du -sh build-s40d build-peers
