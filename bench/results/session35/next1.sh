#!/usr/bin/env bash
# The next GPU session's first call (written in session 35, no device then: loans paused; run
# prep_next.sh here first and carry build-call/). Session 34's next1.sh, split in two to fit 600 s:
#  - main's test_fp8_cuda (its fourth config: each FP8 dtype by the other path, first run) and
#    test_prefill_cuda;
#  - issue 22: a trace of main (bench/trace_prefill.py) at 16x1k and causal, 4x4k and causal,
#    1x16k, 8x2k causal, the causal skew, FP8 e4m3 (copy path) and e5m2 (register path): µs an
#    item by phase and the overhead an item in tiles (the last trace was v4.18's, session 30);
#  - scripts/gpu_prefill_check.sh's san step (racecheck of the ws kernels alone: first run).
B=build-call
source bench/results/call_prologue.sh
mkdir -p build-gpu/tests
ln -sf "$PWD/$B/libflashserve_c.so" build-gpu/libflashserve_c.so
for t in test_prefill_cuda test_fp8_cuda; do ln -sf "$PWD/$B/tests/$t" build-gpu/tests/$t; done
for t in test_fp8_cuda test_prefill_cuda; do
  timeout 150 $B/tests/$t --gtest_brief=1 > "$out/$t.log" 2>&1
  echo "$(el) $t rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/$t.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED" "$out/$t.log" | head -4
done
timeout 200 python3 bench/trace_prefill.py --lib $B/trace/libflashserve_c.so --only 0,1,2,3,4,21,24,29,31 > "$out/trace.log" 2>&1
echo "$(el) trace rc $?"; tail -40 "$out/trace.log"
OUT=$out timeout 180 bash scripts/gpu_prefill_check.sh san 2>&1 | tail -6
echo "$(el) san"
pack_out
