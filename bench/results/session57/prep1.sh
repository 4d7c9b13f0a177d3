#!/usr/bin/env bash
# Session 57's carry for the next calls (issue 22), here, ~9 min: the tree's build (prefill v4.41,
# build-gpu brought up to date) and three bench-only variants (bench/variant_lib.sh, each with its
# test_prefill_cuda linked against them), into build-s57b/, packed as build-s57q/b.tar.xz:
#  - serial/: FLASHSERVE_PREFILL_WS_SERIAL=1 over d 64's 128-row instances (every one: packed,
#    pages, page boxes, with and without the logit transform, bf16 and fp16);
#  - serial128/: FLASHSERVE_PREFILL_WS_SERIAL=1 and FLASHSERVE_PREFILL_WS_HALF_DIAG=0 over d 128's
#    16-bit instances (128- and 176-key tiles; the serial loop has no half tile);
#  - nohalf128/: FLASHSERVE_PREFILL_WS_HALF_DIAG=0 alone over the same (serial128's baseline).
set -euo pipefail
cd "$(dirname "$0")/../../.."
d64=$(ls attention/cuda/prefill_sm90_ws_hd64m128_*.cu)
d128=$(ls attention/cuda/prefill_sm90_ws_hd128*.cu | grep -v fp8)
bash bench/build_pack.sh build-s57b build-s57q
variant() {  # NAME FLAGS SOURCES...
  local name=$1 flags=$2
  shift 2
  VARIANT_TESTS="test_prefill_cuda" bash bench/variant_lib.sh "$name" "$flags" "$@"
  mkdir -p "build-s57b/$name"
  cp "build-var/$name/libflashserve_c.so" "build-var/$name/tests/test_prefill_cuda" "build-s57b/$name/"
  strip --strip-unneeded "build-s57b/$name"/*
  echo "$name: $(diff <(python3 bench/sass_loops.py build-s57b/libflashserve_c.so --md5 | grep prefill | sort) \
    <(python3 bench/sass_loops.py "build-s57b/$name/libflashserve_c.so" --md5 | grep prefill | sort) | grep -c '^<') kernels differ from the tree's"
}
variant serial "-DFLASHSERVE_PREFILL_WS_SERIAL=1" $d64
variant serial128 "-DFLASHSERVE_PREFILL_WS_SERIAL=1 -DFLASHSERVE_PREFILL_WS_HALF_DIAG=0" $d128
variant nohalf128 "-DFLASHSERVE_PREFILL_WS_HALF_DIAG=0" $d128
rm -rf build-s57q && mkdir build-s57q && tar cJf build-s57q/b.tar.xz build-s57b
du -sh build-s57b build-s57q
