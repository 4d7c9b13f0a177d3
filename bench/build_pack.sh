#!/usr/bin/env bash
# A call's carry of the tree's build: build-gpu's library and GPU tests (test_prefill_cuda,
# test_fp8_cuda) brought up to date and stripped into DIR/, packed as PACK/b.tar.xz (unpack on the
# GPU machine with `tar xJf PACK/b.tar.xz`: it holds DIR/). Usage: bench/build_pack.sh DIR PACK
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1 pack=$2
cmake --build build-gpu --target flashserve_c test_prefill_cuda test_fp8_cuda > /dev/null
rm -rf "$dir" && mkdir -p "$dir"
cp build-gpu/libflashserve_c.so build-gpu/tests/test_prefill_cuda build-gpu/tests/test_fp8_cuda "$dir/"
strip --strip-unneeded "$dir"/*.so "$dir"/test_*
rm -rf "$pack" && mkdir "$pack" && tar cJf "$pack/b.tar.xz" "$dir"
du -sh "$dir" "$pack"
