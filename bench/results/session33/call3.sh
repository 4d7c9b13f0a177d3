#!/usr/bin/env bash
# Session 33 call 3 (issue 22): prefill v4.22, one ws instance for packed K/V and one for pages
# (WsKv; call 2: the packed kernels without the paged producer's code ran d 128's short causal
# rows +6-14%).
#  1. the GPU prefill grid and skewed batches, then the whole test_prefill_cuda, test_fp8_cuda
#     (the FP8 instance's template changed) and test_model_cuda (the model's paged prefill);
#  2. ab_prefill, 4 passes, every ws row: v4.22 against main (v420) and rowsonly (the paged
#     instances with the row gather only: TMA page boxes and WsGather compiled out, one walk;
#     paged rows only count there);
#  3. synccheck and memcheck on packed and paged grid cases.
# Carry build-call3/.
B=build-call3
source bench/results/call_prologue.sh
T=$B/tests/test_prefill_cuda
prefill_grid $T
timeout 150 $T --gtest_brief=1 > "$out/test_prefill_all.log" 2>&1
echo "$(el) prefill all rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_prefill_all.log" | tr '\n' ' ')"
for t in test_fp8_cuda test_model_cuda; do
  timeout 120 $B/tests/$t --gtest_brief=1 > "$out/$t.log" 2>&1
  echo "$(el) $t rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/$t.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED" "$out/$t.log" | head -4
done
timeout 200 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 4 \
  --only 0,1,2,3,4,5,6,8,9,10,11,12,13,14,15,16,17,19,20,21,22,23,24,25,26,27,28 \
  --config v420=@$B/v420/libflashserve_c.so --config rowsonly=@$B/rowsonly/libflashserve_c.so > "$out/ab_v422.log" 2>&1
echo "$(el) ab rc $?"; tail -2 "$out/ab_v422.log"
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
sanitize synccheck 80 $T "${cases}PrefillCuda.SkewedVarlenBatches"
sanitize memcheck 80 $T "${cases}PrefillCuda.SkewedVarlenBatches"
pack_out
