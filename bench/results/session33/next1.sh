#!/usr/bin/env bash
# Next session's first call (issue 25): FP8 producer v5, the register path (fp8_regpath.patch:
# the codes loaded into registers chunk by chunk as the last tile's chunks are converted, no code
# slots; shared bytes a code in the producer 4 -> 2), producer at 88 or 96 registers (consumers
# 208 / 200, no local memory in their tile loop), against main (v4.23's FP8 instance).
#  1. test_fp8_cuda of each variant (FP8 prefill against float64 and the CPU, both formats);
#  2. ab_prefill, 5 passes: FP8 rows 29-31 and row 11 (2k over 30k over bf16 pages: the ratio).
# Prediction (history/prefill.md "Session 33"): the producer's pace is shared-memory traffic,
# so +5-15% on the FP8 rows (0.77 of bf16 pages -> 0.82-0.88); less if the loads' latency (one
# tile's conversion of cover) shows. Run bench/results/session33/prep_next1.sh here first;
# carry build-call/.
B=build-call
source bench/results/call_prologue.sh
for v in fp8reg88 fp8reg96; do
  timeout 120 $B/$v/test_fp8_cuda --gtest_brief=1 > "$out/test_fp8_$v.log" 2>&1
  echo "$(el) $v test_fp8_cuda rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_fp8_$v.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED" "$out/test_fp8_$v.log" | head -4
done
timeout 200 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 --only 11,29,30,31 \
  --config reg88=@$B/fp8reg88/libflashserve_c.so --config reg96=@$B/fp8reg96/libflashserve_c.so > "$out/ab_fp8reg.log" 2>&1
echo "$(el) ab rc $?"; grep -v again "$out/ab_fp8reg.log"
pack_out
