#!/usr/bin/env bash
# Session 33 call 4 (issues 22, 25): prefill v4.23, the paged instances by the row gather only
# (TMA page boxes, WsGather, the unfenced walk in paged instances and the proxy-fence A/B gone:
# d 128 paged 8.8k instructions, 49 local loads, against 19.6k and 188; FP8 9.7k and none against
# 16.8k and 20).
#  1. test_prefill_cuda (the grid, now without the tma/gather runs), test_fp8_cuda, test_model_cuda;
#  2. ab_prefill, 4 passes, every ws row and the FP8 rows: v4.23 against main (v4.22);
#  3. synccheck and memcheck on packed and paged grid cases;
#  4. bench_prefill --quick --dims 128 (ours beside torch's cuDNN and flash SDPA, no wheels).
# Carry build-call4/.
B=build-call4
source bench/results/call_prologue.sh
T=$B/tests/test_prefill_cuda
timeout 150 $T --gtest_brief=1 > "$out/test_prefill_all.log" 2>&1
echo "$(el) prefill all rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_prefill_all.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" "$out/test_prefill_all.log" | head -6
for t in test_fp8_cuda test_model_cuda; do
  timeout 120 $B/tests/$t --gtest_brief=1 > "$out/$t.log" 2>&1
  echo "$(el) $t rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/$t.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED" "$out/$t.log" | head -4
done
timeout 200 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 4 \
  --only 0,1,2,3,4,5,6,8,9,10,11,12,13,14,15,16,17,19,20,21,22,23,24,25,26,27,28,29,30,31 \
  --config v422=@$B/v422/libflashserve_c.so > "$out/ab_v423.log" 2>&1
echo "$(el) ab rc $?"; tail -2 "$out/ab_v423.log"
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
sanitize synccheck 80 $T "${cases}PrefillCuda.SkewedVarlenBatches"
sanitize memcheck 80 $T "${cases}PrefillCuda.SkewedVarlenBatches"
timeout 170 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 128 > "$out/bench_prefill_d128.log" 2>&1
echo "$(el) bench_prefill rc $?"; tail -16 "$out/bench_prefill_d128.log"
pack_out
