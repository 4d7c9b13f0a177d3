#!/usr/bin/env bash
# build-s40c/ for call4.sh: build-gpu's library (v4.30 candidate: the mask by immediates,
# online_softmax.cuh's logits_row) with its test_prefill_cuda, test_fp8_cuda and test_decode_cuda;
# base/ (v4.29: build-s40b's library, call 3's); fd64/ (the candidate with d 64's item view by
# multiply-highs: FLASHSERVE_PREFILL_WS_FAST_DIV_D64=1, d 64's bf16 no-transform instances).
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_prefill_cuda tests/test_fp8_cuda tests/test_decode_cuda > /dev/null
S=(attention/cuda/prefill_sm90_ws_hd64{,m128}_bf16{,_paged}.cu)
bash bench/variant_lib.sh fd64 "-DFLASHSERVE_PREFILL_WS_FAST_DIV_D64=1" "${S[@]}" > /dev/null
rm -rf build-s40c && mkdir -p build-s40c/base build-s40c/fd64
cp build-gpu/libflashserve_c.so build-gpu/tests/test_{prefill,fp8,decode}_cuda build-s40c/
cp build-s40b/libflashserve_c.so build-s40c/base/
cp build-var/fd64/libflashserve_c.so build-s40c/fd64/
strip --strip-unneeded build-s40c/*.so build-s40c/test_* build-s40c/fd64/*.so
du -sh build-s40c
