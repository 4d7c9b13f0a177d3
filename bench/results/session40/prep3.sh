#!/usr/bin/env bash
# build-s40b/ for call3.sh: build-gpu's library (v4.29) and tests, st64_3 and st64_4 (d 64's bf16
# no-transform instances, both row tiles, packed and pages, with FLASHSERVE_PREFILL_WS_STAGES_64=3 / 4).
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_prefill_cuda tests/test_fp8_cuda > /dev/null
S=(attention/cuda/prefill_sm90_ws_hd64{,m128}_bf16{,_paged}.cu)
for n in 3 4; do bash bench/variant_lib.sh st64_$n "-DFLASHSERVE_PREFILL_WS_STAGES_64=$n" "${S[@]}" > /dev/null; done
rm -rf build-s40b && mkdir -p build-s40b/st64_3 build-s40b/st64_4
cp build-gpu/libflashserve_c.so build-gpu/tests/test_prefill_cuda build-gpu/tests/test_fp8_cuda build-s40b/
for n in 3 4; do cp build-var/st64_$n/libflashserve_c.so build-s40b/st64_$n/; done
strip --strip-unneeded build-s40b/*.so build-s40b/test_* build-s40b/st64_*/*.so
du -sh build-s40b
