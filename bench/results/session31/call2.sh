#!/usr/bin/env bash
# Session 31 call 2 (issue 22): prefill v4.19's early Q with the claimer thread. Call 1 ran
# session 30's call5.sh: the early Q cut the wait for the next item's Q ("next" 2.41 -> 0.87 us)
# but the main-loop tile grew 1.655 -> 1.823 us: thread 0 read its claim's atomic result at once
# (warp aggregation's shuffle, a spill), holding K(1) and V(0) up. Now thread 32 makes the claim
# when thread 0 asks (after K(0)); thread 0 takes it after K(1) and V(0).
#  1. the GPU prefill grid (an early-Q run a case: one CTA, the whole grid, or 3) and the skewed batches;
#  2. ab_prefill default / early, 3 passes, the rows of call 1;
#  3. the trace of rows 0 and 1 both ways;
#  4. synccheck and racecheck with the early Q on five grid cases and the skewed batches.
# Carry build-gpu/libflashserve_c.so, build-trace/libflashserve_c.so, build-gpu/tests/test_prefill_cuda.
source bench/results/call_prologue.sh
left() { echo $(( ${LIMIT:-300} - ($(date +%s) - t0) )); }
T=$B/tests/test_prefill_cuda
timeout 80 $T --gtest_brief=1 \
  --gtest_filter='Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches' > "$out/test_prefill.log" 2>&1
echo "$(el) prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_prefill.log" | tr '\n' ' ')"
grep -E "Failure|FAILED|kernel" "$out/test_prefill.log" | head -6
timeout 60 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 3 --only 0,1,21,3,7,26,5,25,28,11 \
  --config early=FLASHSERVE_PREFILL_WS_EARLY_Q=1 > "$out/ab_early_q.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_early_q.log"
timeout 30 python3 bench/trace_prefill.py --lib build-trace/libflashserve_c.so --only 0,1,21 \
  --config early=FLASHSERVE_PREFILL_WS_EARLY_Q=1 > "$out/trace.log" 2>&1
echo "$(el) trace rc $?"; cat "$out/trace.log" 2>/dev/null | tail -8
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
for tool in synccheck racecheck; do
  t=$(( $(left) / 2 )); [ $tool = racecheck ] && t=$(left)
  [ $t -lt 15 ] && break
  FLASHSERVE_PREFILL_WS_EARLY_Q=1 sanitize $tool $t $T "${cases}PrefillCuda.SkewedVarlenBatches"
done
