#!/usr/bin/env bash
# Session 33 call 1. Issue 22: prefill v4.21 (session 32's v421_item_desc.patch: the consumers
# read the item's view from the producer) against main's library (v4.20, build-call/v420/):
#  1. the GPU prefill grid and the skewed batches (v4.21);
#  2. ab_prefill, 4 passes, every d 64 / d 128 row the ws kernel runs, v4.21 against v4.20;
#  3. lean (v4.21 with -DFLASHSERVE_PREFILL_WS_LEAN: the paged and A/B-only paths compiled out of
#     the d 64 / d 128 bf16 instances, 8.6k instructions against 20.4k at d 128) against v4.21 on
#     the packed rows only (lean cannot take pages), 3 passes: does code size cost the short rows?
#  4. synccheck on five grid cases and the skewed batches (v4.21).
# Issue 25: trace_decode.py --timeline --fp8 e4m3 at (1,32k) (main's library): where the FP8
# call's 2.2 us outside the split kernel's span go.
# Carry build-call/.
B=build-call
source bench/results/call_prologue.sh
T=$B/tests/test_prefill_cuda
prefill_grid $T
timeout 230 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 4 \
  --only 0,1,2,3,4,5,6,8,11,12,13,14,15,16,17,19,20,21,22,23,24,25,26,27,28 \
  --config v420=@$B/v420/libflashserve_c.so > "$out/ab_v421.log" 2>&1
echo "$(el) ab rc $?"; tail -2 "$out/ab_v421.log"
timeout 110 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 3 \
  --only 0,1,2,3,4,5,8,13,15,16,17,20,21,24,26,27 \
  --config lean=@$B/lean/libflashserve_c.so > "$out/ab_lean.log" 2>&1
echo "$(el) ab lean rc $?"; tail -2 "$out/ab_lean.log"
timeout 40 python3 bench/trace_decode.py --lib $B/v420/libflashserve_c.so --shape 1,32768 --timeline --fp8 e4m3 \
  > "$out/timeline.log" 2>&1
echo "$(el) timeline rc $?"; cat "$out/timeline.log" | tail -4
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
sanitize synccheck 90 $T "${cases}PrefillCuda.SkewedVarlenBatches"
pack_out
