#!/usr/bin/env bash
# Session 36, call 3, not run in session 36 (no device could be started): build-call/ from
# prep_call3.sh: main, its test_fp8_cuda and test_prefill_cuda, trace/ (-DFLASHSERVE_PREFILL_TRACE=1,
# the item boundary's finer stamps), lean0/ (-DFLASHSERVE_PREFILL_WS_FP8_REG_LEAN=0: the register
# path as at 63c40cb, md5), stsm/, early/, trace_early/ (below):
#  - test_fp8_cuda on the landed FP8 v6 (its register path = call 2's fp8v, md5);
#  - the trace with the finer stamps: d 128 packed rows 0-4, 21, 24; paged 6, 22, 25; FP8 29, 31;
#  - one ab of the FP8 rows and bf16 pages, main against lean0, each also with every FP8 pool by
#    the register path (4 passes; last: call 2 measured v6's register path as fp8v);
#  - issue 22: stsm/ (its test_prefill_cuda's grid first; FLASHSERVE_PREFILL_WS_O_STSM=1: O into
#    its TMA buffer by stmatrix, 8 a thread at d 128 instead of 32 four-byte stores) against
#    main on the 128-key short rows
#    (d 128 16x1k, causal, 4x4k causal, 8x2k causal, skew causal; d 64 16x1k causal, 4x4k causal),
#    4 passes. Prediction: level to +1% (the store phase's 32 STS are ~10% of its ~360
#    instructions a warp, and the phase is ~1.1 us of an item's ~15); and early/
#    (FLASHSERVE_PREFILL_WS_EARLY_CLAIM=1: the packed producer claims its next item as an item
#    starts), with its trace (trace_early/) on rows 0, 1, 4. Prediction: level unless the trace's
#    qahead is small (the next Q issued late); the claim's round trip (pclaim) gone.
B=build-call
source bench/results/call_prologue.sh
timeout 60 $B/tests/test_fp8_cuda --gtest_brief=1 > "$out/test_fp8_cuda.log" 2>&1
echo "$(el) test_fp8_cuda rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_fp8_cuda.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" "$out/test_fp8_cuda.log" | head -4
timeout 200 python3 bench/trace_prefill.py --lib $B/trace/libflashserve_c.so --only 0,1,2,3,4,21,24,6,22,25,29,31 > "$out/trace.log" 2>&1
echo "$(el) trace rc $?"; cat "$out/trace.log"
prefill_grid $B/stsm/tests/test_prefill_cuda  # stsm's correctness: the grid and the skewed batches
timeout 200 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 4 --only 0,1,3,21,24,18,16 \
  --config stsm=@$B/stsm/libflashserve_c.so --config early=@$B/early/libflashserve_c.so > "$out/ab_stsm.log" 2>&1
echo "$(el) ab stsm rc $?"; cat "$out/ab_stsm.log"
timeout 100 python3 bench/trace_prefill.py --lib $B/trace_early/libflashserve_c.so --only 0,1,4 > "$out/trace_early.log" 2>&1
echo "$(el) trace early rc $?"; cat "$out/trace_early.log"
timeout 200 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 4 --only 11,29,30,31 \
  --config lean0=@$B/lean0/libflashserve_c.so --config reg=FLASHSERVE_PREFILL_WS_FP8_PATH=reg \
  --config lean0reg=@$B/lean0/libflashserve_c.so,FLASHSERVE_PREFILL_WS_FP8_PATH=reg > "$out/ab_fp8.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_fp8.log"
pack_out
