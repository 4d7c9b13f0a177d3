#!/usr/bin/env bash
# Session 57's carry for the next calls (issue 22), here, ~6 min: the tree's build (prefill v4.41,
# build-gpu brought up to date) and the bench-only variant FLASHSERVE_PREFILL_WS_SERIAL=1 (d 64's
# 128-row instances, every one: packed, pages, page boxes, with and without the logit transform,
# bf16 and fp16; bench/variant_lib.sh, its test_prefill_cuda linked against them) into build-s57b/
# (build-s57b/serial/ the variant's library and test), packed as build-s57q/b.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../.."
srcs=$(ls attention/cuda/prefill_sm90_ws_hd64m128_*.cu)
bash bench/build_pack.sh build-s57b build-s57q
VARIANT_TESTS="test_prefill_cuda" bash bench/variant_lib.sh serial "-DFLASHSERVE_PREFILL_WS_SERIAL=1" $srcs
mkdir -p build-s57b/serial
cp build-var/serial/libflashserve_c.so build-var/serial/tests/test_prefill_cuda build-s57b/serial/
strip --strip-unneeded build-s57b/serial/*
rm -rf build-s57q && mkdir build-s57q && tar cJf build-s57q/b.tar.xz build-s57b
du -sh build-s57b build-s57q
# The variant differs from the tree's library in d 64's 128-row kernels only:
diff <(python3 bench/sass_loops.py build-s57b/libflashserve_c.so --md5 | grep prefill | sort) \
     <(python3 bench/sass_loops.py build-s57b/serial/libflashserve_c.so --md5 | grep prefill | sort) | grep -c '^<' || true
