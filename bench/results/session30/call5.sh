#!/usr/bin/env bash
# Session 30 call 5 (issue 22): prefill v4.19's early Q (FLASHSERVE_PREFILL_WS_EARLY_Q=1, off by
# default: packed K/V, d 128 at 128-key tiles, two Q slots; the next item claimed after an item's K(0), its Q issued two tiles
# in), from call 4's trace: the consumers waited ~2 us an item for the next item's Q stage.
#  1. the GPU prefill grid (one run a case with the early Q) and the skewed batches;
#  2. ab_prefill default / early on the short packed rows, the paged skew and mix (row gather),
#     the chunked row and two controls, 2 passes;
#  3. the trace of rows 0 and 1 both ways, with the time left.
# Built with bench/results/session30/v419_early_q.patch applied (not on main until this passes).
# Carry build-gpu/libflashserve_c.so, build-trace/libflashserve_c.so, build-gpu/tests/test_prefill_cuda.
source bench/results/call_prologue.sh
left() { echo $(( ${LIMIT:-170} - ($(date +%s) - t0) )); }
timeout 80 $B/tests/test_prefill_cuda --gtest_brief=1 \
  --gtest_filter='Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches' > "$out/test_prefill.log" 2>&1
echo "$(el) prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_prefill.log" | tr '\n' ' ')"
grep -E "Failure|FAILED|kernel" "$out/test_prefill.log" | head -6
timeout $(( $(left) - 25 )) python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 2 --only 0,1,21,3,7,26,5,25,28,11 \
  --config early=FLASHSERVE_PREFILL_WS_EARLY_Q=1 > "$out/ab_early_q.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_early_q.log"
[ $(left) -gt 12 ] && timeout $(left) python3 bench/trace_prefill.py --lib build-trace/libflashserve_c.so --only 0,1 \
  --config early=FLASHSERVE_PREFILL_WS_EARLY_Q=1 > "$out/trace.log" 2>&1
echo "$(el) trace rc $?"; cat "$out/trace.log" 2>/dev/null | tail -6
