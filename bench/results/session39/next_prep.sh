#!/usr/bin/env bash
# Session 40's first call (issue 22), prepared in session 39: build-s40/ from build-gpu (the tree)
# and st3, its d 128 128-key instances (packed and paged, both logit forms, bf16 and fp16) with
# three stages (FLASHSERVE_PREFILL_WS_STAGES_128=3: one Q slot, no O buffer), with its
# test_prefill_cuda. Session 39's call 7 (an H200, 6 passes) read st3 on packed 4x4k causal +4.3%
# and 16x1k causal +1.5%, pages level.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_prefill_cuda > /dev/null
S=(attention/cuda/prefill_sm90_ws_hd128_{bf16,fp16}{,_paged}{,_transform}.cu)
VARIANT_TESTS=test_prefill_cuda bash bench/variant_lib.sh st3 "-DFLASHSERVE_PREFILL_WS_STAGES_128=3" "${S[@]}" > /dev/null
rm -rf build-s40 && mkdir -p build-s40/st3
cp build-gpu/libflashserve_c.so build-s40/
cp build-var/st3/libflashserve_c.so build-var/st3/tests/test_prefill_cuda build-s40/st3/
strip --strip-unneeded build-s40/*.so build-s40/st3/*
du -sh build-s40
