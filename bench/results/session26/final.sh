#!/usr/bin/env bash
# Session 26's one call (refused starts used most of the session's device time; 540 s left):
# the unrun default-on changes checked first, then their measurements, in the issues' order.
#  1. (22) test_prefill_cuda: prefill v4.17's TMA store of O (both paths, padded strided O).
#  2. (25) test_fp8_cuda: the FP8 ws producer v2; racecheck on its many-tile case.
#  3. (27) test_skinny_gemm_cuda, test_model_cuda: the decode step's chain of dependents.
#  4. (22) A/B v4.17 against FLASHSERVE_PREFILL_WS_TMA_O=0, 2 passes.
#  5. (25) bench_prefill --chunked-only: FP8 pages against bf16 pages.
#  6. (27) bench_model --quick --steps-only, all dependents and none.
# Carry build-gpu/libflashserve_c.so, build-gpu/tests/{test_prefill_cuda,test_fp8_cuda,
# test_skinny_gemm_cuda,test_model_cuda}, build-gpu/bench/bench_model.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p "$out"
B=build-gpu
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
timeout 90 $B/tests/test_prefill_cuda --gtest_brief=1 > "$out/test_prefill.log" 2>&1
echo "$(el) prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_prefill.log" | tr '\n' ' ')"
grep -E "Failure|FAILED|Expected|Which is" "$out/test_prefill.log" | head -8
timeout 60 $B/tests/test_fp8_cuda > "$out/test_fp8.log" 2>&1
echo "$(el) fp8 rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_fp8.log" | tr '\n' ' ')"
grep -E "Failure|FAILED|Expected|Which is" "$out/test_fp8.log" | head -8
timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool racecheck $B/tests/test_fp8_cuda \
  --gtest_filter='Fp8PrefillCuda.WsPipelineOverManyTiles' > "$out/san_racecheck.log" 2>&1
echo "$(el) racecheck rc $? $(grep -E 'RACECHECK SUMMARY' "$out/san_racecheck.log" | tail -1)"
timeout 45 $B/tests/test_skinny_gemm_cuda > "$out/test_skinny.log" 2>&1
echo "$(el) skinny rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_skinny.log" | tr '\n' ' ')"
timeout 60 $B/tests/test_model_cuda > "$out/test_model.log" 2>&1
echo "$(el) model rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_model.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" "$out/test_skinny.log" "$out/test_model.log" | head -6
timeout 80 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --only 0,1,2,3,5,20,21 --passes 2 \
  --config regs=FLASHSERVE_PREFILL_WS_TMA_O=0 > "$out/ab_tma_o.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_tma_o.log" | tail -16
timeout 45 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --chunked-only --rounds 3 \
  > "$out/bench_prefill_fp8.log" 2>&1
echo "$(el) fp8 bench rc $?"; grep -E "FP8|^bfloat" "$out/bench_prefill_fp8.log" | tail -2
for cfg in "pdl" "none FLASHSERVE_MODEL_PDL=0 FLASHSERVE_SKINNY_PDL=0"; do
  name=${cfg%% *}; vars=${cfg#"$name"}
  env $vars timeout 100 $B/bench/bench_model --quick --steps-only > "$out/bench_model_$name.log" 2>&1
  echo "$(el) == $name ($vars) rc $?"; grep -A6 "^batch" "$out/bench_model_$name.log" | head -6
done
