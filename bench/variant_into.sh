#!/usr/bin/env bash
# One variant of a carry beside the tree's build: bench/variant_lib.sh's library NAME (FLAGS on
# SOURCE.cu..., with its test_prefill_cuda) stripped into DIR/NAME/, and how many of its prefill
# kernels differ from DIR/libflashserve_c.so's (md5 of the SASS, bench/sass_loops.py). DIR holds
# the tree's build already (bench/build_pack.sh). Usage: bench/variant_into.sh DIR NAME "FLAGS" SOURCE.cu...
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1 name=$2 flags=$3
shift 3
VARIANT_TESTS="test_prefill_cuda" bash bench/variant_lib.sh "$name" "$flags" "$@" > /dev/null
mkdir -p "$dir/$name"
cp "build-var/$name/libflashserve_c.so" "build-var/$name/tests/test_prefill_cuda" "$dir/$name/"
strip --strip-unneeded "$dir/$name"/*
echo "$name: $(diff <(python3 bench/sass_loops.py "$dir/libflashserve_c.so" --md5 | grep prefill | sort) \
  <(python3 bench/sass_loops.py "$dir/$name/libflashserve_c.so" --md5 | grep prefill | sort) | grep -c '^<') kernels differ from the tree's"
