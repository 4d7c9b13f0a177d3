#!/usr/bin/env bash
# Session 34 call 4 (issue 25): e4m3 pairs converted from a word's halves in place (F2FP .H1;
# fp8_convert.cuh), no shift each 4 codes: variant h1 (the FP8 prefill and decode e4m3 objects),
# reg88h1 (the same with session 33's register path, 88 producer registers).
#  1. h1's test_fp8_cuda and test_decode_cuda; reg88h1's test_fp8_cuda.
#  2. ab rows 11 (bf16 pages, for the ratio), 29-31: main, h1, reg88h1, 5 passes.
#  3. bench_decode --fp8 e4m3 on issue 25's rows, main with h1 as its variant.
B=build-call4
source bench/results/call_prologue.sh
for t in h1/test_fp8_cuda h1/test_decode_cuda reg88h1/test_fp8_cuda; do
  n=${t//\//_}
  timeout 120 $B/$t --gtest_brief=1 > "$out/$n.log" 2>&1
  echo "$(el) $t rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/$n.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED" "$out/$n.log" | head -4
done
timeout 120 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 --only 11,29,30,31 \
  --config h1=@$B/h1/libflashserve_c.so --config reg88h1=@$B/reg88h1/libflashserve_c.so > "$out/ab_h1.log" 2>&1
echo "$(el) ab h1 rc $?"; grep -v again "$out/ab_h1.log"
timeout 200 python3 bench/bench_decode.py --lib $B/libflashserve_c.so --fp8 e4m3 --quick --no-flex \
  --variant h1=$B/h1/libflashserve_c.so --only "(64,8k)" --only "(128,2k)" --only "(256,1k)" --only "(1,32k)" \
  > "$out/decode_h1.log" 2>&1
echo "$(el) decode rc $?"; grep -v "^{" "$out/decode_h1.log" | tail -12
pack_out
