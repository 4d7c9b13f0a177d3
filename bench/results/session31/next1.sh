#!/usr/bin/env bash
# Next session's first call (issue 22): prefill v4.20, the consumers' plain tile run
# (bench/results/session31/v420_plain_tiles.patch, applied and built before the call;
# FLASHSERVE_PREFILL_WS_PLAIN=0 is v4.18's loop in the same library).
#  1. the GPU prefill grid (the plain run in every run, off in every other case's TMA_O=0 run),
#     the skewed batches, the FP8 prefill tests;
#  2. ab_prefill default / PLAIN=0, 3 passes: d 64 (7, 15, 16, 17, 18, 8, 27), d 128 (0, 1, 2, 3,
#     21, 4, 5, 24, 26), d 256 (9, 10), paged and FP8 (6, 11, 29);
#  3. synccheck on five grid cases and the skewed batches (racecheck: too slow for a call).
# Prediction (history/prefill.md "prefill v4.20"): d 64 non-causal +5-10%, d 64 causal ±3%,
# d 128 / d 256 0..+4%.
# Carry build-gpu/libflashserve_c.so, build-gpu/tests/test_prefill_cuda, build-gpu/tests/test_fp8_cuda,
# build-r40/libflashserve_c.so.
source bench/results/call_prologue.sh
T=$B/tests/test_prefill_cuda
timeout 90 $T --gtest_brief=1 --gtest_filter='Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches' \
  > "$out/test_prefill.log" 2>&1
echo "$(el) prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_prefill.log" | tr '\n' ' ')"
grep -E "Failure|FAILED|kernel" "$out/test_prefill.log" | head -6
timeout 60 $B/tests/test_fp8_cuda --gtest_brief=1 > "$out/test_fp8.log" 2>&1
echo "$(el) fp8 rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_fp8.log" | tr '\n' ' ')"
timeout 240 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 3 \
  --only 7,15,16,17,18,8,27,0,1,2,3,21,4,5,24,26,9,10,6,11,29 \
  --config general=FLASHSERVE_PREFILL_WS_PLAIN=0 > "$out/ab_plain.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_plain.log"
# d 64 16x1k runs v3 by default (ws_by_default: ws lost there); with the plain run, ws again.
timeout 60 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 3 --only 7,18 \
  --config ws=FLASHSERVE_PREFILL_KERNEL=ws --config ws_general=FLASHSERVE_PREFILL_KERNEL=ws,FLASHSERVE_PREFILL_WS_PLAIN=0 \
  > "$out/ab_d64_short.log" 2>&1
echo "$(el) ab d64 rc $?"; cat "$out/ab_d64_short.log"
# Issue 25: the FP8 producer at 56 registers (fp8_producer_56regs.patch, applied too), against
# a library built with -DFLASHSERVE_PREFILL_WS_FP8_REGS=40 (session 29's; build-r40, see README).
[ -f build-r40/libflashserve_c.so ] && timeout 90 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 3 \
  --only 11,29,30,31 --config r40=@build-r40/libflashserve_c.so > "$out/ab_fp8_regs.log" 2>&1
echo "$(el) ab fp8 rc $?"; cat "$out/ab_fp8_regs.log" 2>/dev/null
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool synccheck $T \
  --gtest_filter="${cases}PrefillCuda.SkewedVarlenBatches" > "$out/san_synccheck.log" 2>&1
echo "$(el) synccheck rc $? $(grep -E 'ERROR SUMMARY' "$out/san_synccheck.log" | tail -1)"
