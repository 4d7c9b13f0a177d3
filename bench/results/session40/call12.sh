#!/usr/bin/env bash
# Session 40's twelfth call, carry build-s40g: decode_finish without its pass loop (the kernel
# always ran one pass of its 16 rows; session 38's leftover): decode's SASS changes (same
# instruction counts), so test_decode_cuda and test_fp8_cuda (FP8 decode) whole, and
# bench_decode --quick against v4.30 (base) in the same process. Prediction: level.
B=build-s40g
source bench/results/call_prologue.sh
for t in test_decode_cuda test_fp8_cuda; do suite $B/$t; done
timeout 200 python3 bench/bench_decode.py --quick --no-flex --lib $B/libflashserve_c.so \
  --variant base=$B/base/libflashserve_c.so > "$out/decode.log" 2>&1
echo "$(el) decode rc $?"; tail -6 "$out/decode.log"
