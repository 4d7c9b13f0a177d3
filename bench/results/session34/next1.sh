#!/usr/bin/env bash
# Next session's first call (written in session 34, after its device time ran out; run
# prep_next1.sh here first, carry build-call/). Nothing in it has run.
#  1. Issue 22: a trace of main (v4.23; bench/trace_prefill.py) at 16x1k and causal, 4x4k and
#     causal, 1x16k, 8x2k causal, the causal skew, FP8 e4m3 (copy path) and e5m2 (register
#     path): µs an item by phase and the overhead an item in tiles. The last trace was v4.18's
#     (session 30), before v4.22 took the spills out of the packed kernels; the three changes at
#     the item boundary since (v4.19, v4.21, v4.24) measured level or worse.
#  2. scripts/gpu_prefill_check.sh's san step, first run since racecheck instruments the ws
#     kernels alone (session 34: 0 hazards on cases 9, 10, 21, 22 by hand).
#  3. bench_prefill.py's ws_alt column from fs_prefill_ws_key_tile (first run): the chunked row
#     and the paged-only row, d 128 (the column should time the tile the default does not take).
#  4. Issue 25: ab of the FP8 rows with FLASHSERVE_PREFILL_WS_FP8_PATH=reg against the default
#     (e4m3 by the register path: call 1 of session 34 read it 455 vs 462 and 402 vs 431), and
#     regmap (FLASHSERVE_PREFILL_WS_FP8_REG_MAP=1: WsFp8PairedLanes, the producer's tile loop
#     890 -> 761 instructions, selects 132 -> 4, local loads 8 -> 7) by the register path for
#     both dtypes. Prediction: regmap +3-6% over reg on e4m3 and e5m2 (the selects were ~4 integer
#     ops a 16-code chunk beside ~12 of conversion on the pipe that sets the pace).
# First of all, main's test_fp8_cuda (its new config: each dtype by the other path) and
# test_prefill_cuda.
B=build-call
source bench/results/call_prologue.sh
mkdir -p build-gpu/tests
ln -sf "$PWD/$B/libflashserve_c.so" build-gpu/libflashserve_c.so
for t in test_prefill_cuda test_fp8_cuda; do ln -sf "$PWD/$B/tests/$t" build-gpu/tests/$t; done
for t in test_fp8_cuda test_prefill_cuda; do  # test_fp8_cuda's fourth config (the other FP8 path) is new
  timeout 150 $B/tests/$t --gtest_brief=1 > "$out/$t.log" 2>&1
  echo "$(el) $t rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/$t.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED" "$out/$t.log" | head -4
done
timeout 200 python3 bench/trace_prefill.py --lib $B/trace/libflashserve_c.so --only 0,1,2,3,4,21,24,29,31 > "$out/trace.log" 2>&1
echo "$(el) trace rc $?"; tail -40 "$out/trace.log"
OUT=$out timeout 200 bash scripts/gpu_prefill_check.sh san 2>&1 | tail -6
echo "$(el) san"
timeout 120 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --chunked-only --rounds 2 > "$out/bench_chunked.log" 2>&1
echo "$(el) bench chunked rc $?"; tail -8 "$out/bench_chunked.log"
timeout 120 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --paged-only --rounds 2 > "$out/bench_paged.log" 2>&1
echo "$(el) bench paged rc $?"; tail -8 "$out/bench_paged.log"
timeout 60 $B/regmap/test_fp8_cuda --gtest_brief=1 > "$out/test_fp8_regmap.log" 2>&1
echo "$(el) regmap test_fp8_cuda rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_fp8_regmap.log" | tr '\n' ' ')"
timeout 120 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 --only 11,29,30,31 \
  --config reg=FLASHSERVE_PREFILL_WS_FP8_PATH=reg --config copy=FLASHSERVE_PREFILL_WS_FP8_PATH=copy \
  --config regmap=@$B/regmap/libflashserve_c.so,FLASHSERVE_PREFILL_WS_FP8_PATH=reg > "$out/ab_fp8_path.log" 2>&1
echo "$(el) ab fp8 path rc $?"; grep -v again "$out/ab_fp8_path.log"
pack_out
