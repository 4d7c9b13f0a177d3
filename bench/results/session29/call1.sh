#!/usr/bin/env bash
# Session 29 call 1 (issue 22): prefill v4.18, Q's second slot in O's buffer (d 128 at 128-key
# tiles and d 64: the next item's Q loads during this one; each warpgroup's O goes into its own
# rows of the slot its Q came in). The GPU prefill tests (outputs poisoned first), the same-process
# A/B against v4.17 (FLASHSERVE_PREFILL_WS_Q_SLOTS=1 in this library, and the last commit's
# library), 3 passes, on the rows those instances run; then (issue 25) what sets the FP8
# producer's pace; then racecheck, synccheck and memcheck on grid cases with the time left.
# Carry build-gpu/libflashserve_c.so, build-gpu/ab (v417, v418, fp8p24: libflashserve_c.so each),
# build-gpu/tests/test_prefill_cuda, build-gpu/tests/test_fp8_cuda.
source bench/results/call_prologue.sh
T=$B/tests/test_prefill_cuda
left() { echo $(( 575 - ($(date +%s) - t0) )); }
timeout 140 $T --gtest_brief=1 > "$out/test_prefill.log" 2>&1
echo "$(el) prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_prefill.log" | tr '\n' ' ')"
grep -E "Failure|FAILED|Expected|Which is" "$out/test_prefill.log" | head -8
timeout 60 $B/tests/test_fp8_cuda > "$out/test_fp8.log" 2>&1
echo "$(el) fp8 rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_fp8.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" "$out/test_fp8.log" | head -4
# Rows: d 128 16x1k (0, 1), 4x4k causal (3), 8x2k causal (21), d 64 4x4k (15, 16), 1x16k (17, 8),
# skew (24-27), mix (28), 4x4k causal paged 64 (14); controls on the 176-key tile (same code both
# ways): 4x4k (2), 8x2k (20), 1x16k causal (5).
timeout 200 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 3 \
  --only 0,1,3,21,15,16,17,8,24,25,26,27,28,14,2,20,5 \
  --config q1=FLASHSERVE_PREFILL_WS_Q_SLOTS=1 --config v417=@$B/ab/v417/libflashserve_c.so \
  > "$out/ab_v418.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_v418.log"
# Issue 25: the FP8 producer v4 (its conversion loop software-pipelined, 40 registers) against
# v3 (v4.18's library, build-gpu/ab/v418) and v4 at 24 registers (build-gpu/ab/fp8p24), and what
# sets its pace (bench-only switches, wrong outputs: the conversion skipped, 1, or the copies of
# the codes, 2), on FP8 rows 29, 30 beside bf16 pages of the same shapes (rows 11, 6).
timeout 90 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 2 --only 11,29,6,30 \
  --config v3=@$B/ab/v418/libflashserve_c.so --config p24=@$B/ab/fp8p24/libflashserve_c.so \
  --config noconv=FLASHSERVE_PREFILL_WS_FP8_DIAG=1 --config nocopy=FLASHSERVE_PREFILL_WS_FP8_DIAG=2 \
  > "$out/ab_fp8_diag.log" 2>&1
echo "$(el) fp8 diag rc $?"; cat "$out/ab_fp8_diag.log"
# Grid cases 0, 34, 45, 46, 47 (gpu_prefill_check.sh's): d 64 and 128, packed, pages of 16 and 64,
# GQA 8/2, causal; racecheck first, each tool a third of the time left.
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
for tool in racecheck synccheck memcheck; do
  t=$(( $(left) / 3 )); [ $tool = synccheck ] && t=$(( $(left) / 2 )); [ $tool = memcheck ] && t=$(left)
  [ $t -lt 15 ] && break
  timeout $t /usr/local/cuda/bin/compute-sanitizer --tool $tool $T \
    --gtest_filter="${cases}PrefillCuda.SkewedVarlenBatches" > "$out/san_$tool.log" 2>&1
  echo "$(el) $tool rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san_$tool.log" | tail -1)"
done
