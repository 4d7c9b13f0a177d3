#!/usr/bin/env bash
# Next session's first call (issue 22): prefill v4.20 (bench/results/session31/v420_plain_tiles.patch,
# applied and built before the call): the plain tile run, the softmax kept under P·V in ptxas's
# schedule, O rescaled outside the ping-pong's window, uniform K/V descriptors.
# FLASHSERVE_PREFILL_WS_PLAIN=0: the general body for every tile (the other changes kept);
# build-v418: main's kernel.
#  1. the GPU prefill grid (the plain run in every run, off in every other case's TMA_O=0 run),
#     the skewed batches, the FP8 prefill tests;
#  2. ab_prefill default / PLAIN=0 / v4.18, 3 passes, every row (session 31's call 2 timed 10
#     rows x 2 configs x 3 passes in 11 s); d 64 16x1k by ws beside v3, its default;
#  3. synccheck on five grid cases and the skewed batches (racecheck: too slow for a call).
# Prediction (history/prefill.md "prefill v4.20"): d 128 at 128 keys and d 64 +4-10%, 176 keys
# and d 256 +2-5%.
# Carry build-gpu/libflashserve_c.so, build-gpu/tests/test_prefill_cuda, build-gpu/tests/test_fp8_cuda,
# build-v418/libflashserve_c.so.
source bench/results/call_prologue.sh
T=$B/tests/test_prefill_cuda
timeout 90 $T --gtest_brief=1 --gtest_filter='Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches' \
  > "$out/test_prefill.log" 2>&1
echo "$(el) prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_prefill.log" | tr '\n' ' ')"
grep -E "Failure|FAILED|kernel" "$out/test_prefill.log" | head -6
timeout 60 $B/tests/test_fp8_cuda --gtest_brief=1 > "$out/test_fp8.log" 2>&1
echo "$(el) fp8 rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_fp8.log" | tr '\n' ' ')"
timeout 300 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 3 \
  --config general=FLASHSERVE_PREFILL_WS_PLAIN=0 --config v418=@build-v418/libflashserve_c.so \
  > "$out/ab_plain.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_plain.log"
# d 64 16x1k runs v3 by default (ws_by_default: ws lost there); with v4.20, ws again.
timeout 60 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 3 --only 7,18 \
  --config ws=FLASHSERVE_PREFILL_KERNEL=ws --config ws_general=FLASHSERVE_PREFILL_KERNEL=ws,FLASHSERVE_PREFILL_WS_PLAIN=0 \
  > "$out/ab_d64_short.log" 2>&1
echo "$(el) ab d64 rc $?"; cat "$out/ab_d64_short.log"
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
sanitize synccheck 100 $T "${cases}PrefillCuda.SkewedVarlenBatches"
