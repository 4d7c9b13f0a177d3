#!/usr/bin/env bash
# A call's carry for an A/B on the GPU machine: build-gpu's library and test_prefill_cuda brought up
# to date, the variant NAME built by variant_lib.sh (FLAGS on SOURCE.cu..., with its
# test_prefill_cuda), both stripped into OUT/: OUT/libflashserve_c.so (the tree's) and
# OUT/NAME/{libflashserve_c.so,test_prefill_cuda}.
# Usage: bench/variant_pack.sh OUT NAME "FLAGS" SOURCE.cu...
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1 name=$2 flags=$3
shift 3
ninja -C build-gpu flashserve_c tests/test_prefill_cuda > /dev/null
VARIANT_TESTS=test_prefill_cuda bash bench/variant_lib.sh "$name" "$flags" "$@" > /dev/null
rm -rf "$out" && mkdir -p "$out/$name"
cp build-gpu/libflashserve_c.so "$out/"
cp "build-var/$name/libflashserve_c.so" "build-var/$name/tests/test_prefill_cuda" "$out/$name/"
strip --strip-unneeded "$out"/*.so "$out/$name"/*
du -sh "$out"
