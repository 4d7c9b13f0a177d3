#!/usr/bin/env bash
# Session 34 call 3:
#  1. Issue 22: racecheck of the ws kernels (v4.23, main) - last run clean on v4.17; on v4.18 it
#     did not finish in 150 s over whole test cases. Now only the ws kernels are instrumented
#     (--kernel-name kns=prefill_sm90_ws), grid cases 21 (d 128 bf16 causal packed, heads 1/1),
#     22 (the same in 16-token pages), 9 and 10 (d 64), one case a run.
#  2. Issue 25: tools/pipe_rates with mixes: which pipe cvt e4m3x2 (F2FP.F16.E4M3.UNPACK_B) shares
#     (call 2: alone 41.8/clk/SM; its absence lifted the FP8 register path 454 -> 513).
B=build-call3
source bench/results/call_prologue.sh
$B/tools/pipe_rates | tee "$out/pipe_rates.log"
echo "$(el) pipe_rates"
for c in 21 22 9 10; do
  timeout 130 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --kernel-name kns=prefill_sm90_ws \
    $B/tests/test_prefill_cuda --gtest_filter="Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/$c" > "$out/race_$c.log" 2>&1
  echo "$(el) racecheck case $c rc $? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED' "$out/race_$c.log" | tr '\n' ' ')"
done
pack_out
