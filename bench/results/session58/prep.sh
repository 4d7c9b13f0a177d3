#!/usr/bin/env bash
# Session 58's carry (issue 22), here, ~5 min: the tree's build (prefill v4.41; test_prefill_cuda
# with CapturedStaticWalk) and session 57's three bench-only variants rebuilt from this tree (each
# with its test_prefill_cuda, bench/variant_into.sh), into build-s58b/, packed as build-s58q/b.tar.xz:
#  - serial/: FLASHSERVE_PREFILL_WS_SERIAL=1 over d 64's 128-row instances, with the window's
#    pin (session 58: session 57's build of it had the exps outside the ping-pong's window);
#  - serial128/: FLASHSERVE_PREFILL_WS_SERIAL=1 and FLASHSERVE_PREFILL_WS_HALF_DIAG=0 over d 128's
#    16-bit instances;
#  - nohalf128/: FLASHSERVE_PREFILL_WS_HALF_DIAG=0 alone over the same (serial128's baseline).
set -euo pipefail
cd "$(dirname "$0")/../../.."
d64=$(ls attention/cuda/prefill_sm90_ws_hd64m128_*.cu)
d128=$(ls attention/cuda/prefill_sm90_ws_hd128*.cu | grep -v fp8)
bash bench/build_pack.sh build-s58b build-s58q
bash bench/variant_into.sh build-s58b serial "-DFLASHSERVE_PREFILL_WS_SERIAL=1" $d64
bash bench/variant_into.sh build-s58b serial128 "-DFLASHSERVE_PREFILL_WS_SERIAL=1 -DFLASHSERVE_PREFILL_WS_HALF_DIAG=0" $d128
bash bench/variant_into.sh build-s58b nohalf128 "-DFLASHSERVE_PREFILL_WS_HALF_DIAG=0" $d128
rm -rf build-s58q && mkdir build-s58q && tar cJf build-s58q/b.tar.xz build-s58b
du -sh build-s58b build-s58q
