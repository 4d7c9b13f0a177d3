#!/usr/bin/env bash
# Next session's first call (issue 22): prefill v4.21 (bench/results/session32/v421_item_desc.patch,
# applied and built before the call: the consumers read the item's view from the producer in the
# dynamic walk) against main's library (v4.20, copied to build-call/v420/ before applying):
#  1. the GPU prefill grid and the skewed batches (the dynamic walk on persistent grids);
#  2. ab_prefill, 5 passes, every d 64 / d 128 row the ws kernel runs, default against v4.20;
#  3. synccheck on five grid cases and the skewed batches.
# Prediction (history/prefill.md "prefill v4.21"): +1-3% on short items (16x1k, causal, skewed),
# level on 1x16k.
# Carry build-call/ (libflashserve_c.so, tests/test_prefill_cuda, v420/libflashserve_c.so).
B=build-call
source bench/results/call_prologue.sh
T=$B/tests/test_prefill_cuda
prefill_grid $T
timeout 300 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 \
  --only 0,1,2,3,4,5,6,8,11,12,13,14,15,16,17,19,20,21,22,23,24,25,26,27,28 \
  --config v420=@$B/v420/libflashserve_c.so > "$out/ab_v421.log" 2>&1
echo "$(el) ab rc $?"; tail -2 "$out/ab_v421.log"
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
sanitize synccheck 100 $T "${cases}PrefillCuda.SkewedVarlenBatches"
pack_out
