#!/usr/bin/env bash
# Session 37's call 3: build-c3/ (~52 MB; with the tree's 9 MB under the 64 MiB a call carries):
# the tree's library (prefill v4.25: O by stmatrix by default) and its test_prefill_cuda; trace/
# (the tree traced), trace_noo/ (FLASHSERVE_PREFILL_WS_PROBE_NO_O=1: O's stores left out, wrong
# outputs: the boundary's share they take; its TFLOP/s in the trace's first column);
# fastdiv/ (FLASHSERVE_PREFILL_WS_FAST_DIV=1), both/ (fastdiv and ahead); ahead/ and trace_ahead/
# (FLASHSERVE_PREFILL_WS_VIEW_AHEAD=1: the next item's view made under the last P·V), ahead's
# test_prefill_cuda.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_prefill_cuda > /dev/null
ws=(attention/cuda/prefill_sm90_ws_hd{64,128,128n176,256}_{bf16,fp16}{,_paged}.cu attention/cuda/prefill_sm90_ws_hd128_fp8{,_reg}.cu)
bench/variant_lib.sh trace "-DFLASHSERVE_PREFILL_TRACE=1" "${ws[@]}" attention/cuda/prefill_cuda.cu > /dev/null
bench/variant_lib.sh fastdiv "-DFLASHSERVE_PREFILL_WS_FAST_DIV=1" "${ws[@]}" > /dev/null
bench/variant_lib.sh both "-DFLASHSERVE_PREFILL_WS_FAST_DIV=1 -DFLASHSERVE_PREFILL_WS_VIEW_AHEAD=1" "${ws[@]}" > /dev/null
bench/variant_lib.sh trace_noo "-DFLASHSERVE_PREFILL_TRACE=1 -DFLASHSERVE_PREFILL_WS_PROBE_NO_O=1" "${ws[@]}" \
  attention/cuda/prefill_cuda.cu > /dev/null
VARIANT_TESTS=test_prefill_cuda bench/variant_lib.sh ahead "-DFLASHSERVE_PREFILL_WS_VIEW_AHEAD=1" "${ws[@]}" > /dev/null
bench/variant_lib.sh trace_ahead "-DFLASHSERVE_PREFILL_TRACE=1 -DFLASHSERVE_PREFILL_WS_VIEW_AHEAD=1" "${ws[@]}" \
  attention/cuda/prefill_cuda.cu > /dev/null
rm -rf build-c3 && mkdir -p build-c3/tests
cp build-gpu/libflashserve_c.so build-c3/
cp build-gpu/tests/test_prefill_cuda build-c3/tests/
for v in trace trace_noo ahead trace_ahead fastdiv both; do mkdir -p build-c3/$v && cp build-var/$v/libflashserve_c.so build-c3/$v/; done
mkdir -p build-c3/ahead/tests && cp build-var/ahead/tests/test_prefill_cuda build-c3/ahead/tests/
strip --strip-unneeded build-c3/*.so build-c3/*/*.so build-c3/tests/* build-c3/ahead/tests/*
du -sh build-c3
