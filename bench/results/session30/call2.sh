#!/usr/bin/env bash
# Session 30 call 2 (issues 22 and 27): prefill v4.19 (the next item's S(0) carried into the last
# item's last issue slot, FLASHSERVE_PREFILL_WS_CARRY=1; off by default until measured: every
# item's last slot then issues a dropped S, so that no wgmma sits in a branch) and the sampler's
# fix (call1's tests, where call1 did not run).
#  1. test_sampler_cuda, test_model_cuda (the sampler's fix; logprobs on the device).
#  2. test_prefill_cuda (grid: two carried runs a case, one CTA every third case), test_fp8_cuda.
#  3. ab_prefill: default (carry off, the dropped S) / carry on / v4.18's library, 3 passes.
#  4. synccheck, memcheck, racecheck on grid cases and the skewed batches with the carry on.
# Carry build-gpu/libflashserve_c.so, build-gpu/ab/v418, build-gpu/tests/{test_prefill_cuda,
# test_fp8_cuda,test_sampler_cuda,test_model_cuda}.
source bench/results/call_prologue.sh
left() { echo $(( ${LIMIT:-575} - ($(date +%s) - t0) )); }
for t in test_sampler_cuda test_model_cuda; do
  timeout 90 $B/tests/$t > "$out/$t.log" 2>&1
  echo "$(el) $t rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/$t.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED  \]|Failure$" -A3 "$out/$t.log" | head -8
done
T=$B/tests/test_prefill_cuda
timeout 200 $T --gtest_brief=1 > "$out/test_prefill.log" 2>&1
echo "$(el) prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_prefill.log" | tr '\n' ' ')"
grep -E "Failure|FAILED|Expected|Which is|kernel" "$out/test_prefill.log" | head -10
timeout 60 $B/tests/test_fp8_cuda --gtest_brief=1 > "$out/test_fp8.log" 2>&1
echo "$(el) fp8 rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_fp8.log" | tr '\n' ' ')"
# Rows: d 128 16x1k (0, 1), 4x4k causal (3), 8x2k causal (21), 4x4k causal paged 16 / 64 (6, 14),
# d 64 16x1k (7, 18), 4x4k (15, 16), 1x16k causal (8), skew (24-27), mix (28); control on the
# 176-key tile (one Q slot: no carry, no dropped S): 4x4k (2).
timeout $(( $(left) - 150 )) python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 3 \
  --only 0,1,3,21,6,14,7,18,15,16,8,24,25,26,27,28,2 \
  --config carry=FLASHSERVE_PREFILL_WS_CARRY=1 --config v418=@$B/ab/v418/libflashserve_c.so \
  > "$out/ab_carry.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_carry.log"
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
for tool in synccheck memcheck racecheck; do
  t=$(( $(left) / 2 )); [ $tool = racecheck ] && t=$(left)
  [ $t -lt 15 ] && break
  FLASHSERVE_PREFILL_WS_CARRY=1 timeout $t /usr/local/cuda/bin/compute-sanitizer --tool $tool $T \
    --gtest_filter="${cases}PrefillCuda.SkewedVarlenBatches" > "$out/san_$tool.log" 2>&1
  echo "$(el) $tool rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san_$tool.log" | tail -1)"
done
