#!/usr/bin/env bash
# Session 43 call 3 (issue 22), carry build-s43b: the tree's library and pb2/ (the paged 128-key
# instances and prefill_cuda.cu with FLASHSERVE_PREFILL_WS_PAGE_BOXES=1, the boxes in a producer
# loop apart from the row gather's, which call 2's pb had in one: 16-token pages -3..-9% there;
# its test_prefill_cuda), gd4/ (GATHER_DIAG=4) and pv/ (GATHER_DIAG=5); next_prep.sh builds it.
# 1. pb2's tests on pages.
# 2. ab 8 passes, pb2 against the tree: pages of 128/256 tokens, 16-token pages, packed controls.
#    Prediction (before the run): 128/256-token pages +3-6% (call 2's pb), within 5% of packed;
#    16-token pages level (the gather's tile loop 224 instructions, 13 local loads, against the
#    tree's 218 / 10; pb's 357 / 26).
# 3. The gather's copies at 4 bytes of their 16 (gd4: cp.async.ca, the same instructions, a quarter
#    of the bytes) against the tree, 16-token pages. Prediction: if gd4 reads as call 2's gd2
#    (V's copies gone: +14-33%), the gathered bytes set the pace; if as the tree, the instructions.
# 4. Packed K/V with V's TMA boxes skipped (pv: GATHER_DIAG=5), against the tree. Prediction: if
#    packed tiles pay for their loads as gd2 says (+11% over packed with half the bytes), +5-11%.
# 5. memcheck, synccheck and racecheck over BigPages on pb2 (SLIM=1, call3b.sh: no racecheck,
#    shorter runs, for the device time left).
B=build-s43b
SLIM=${SLIM:-0}
source bench/results/call_prologue.sh
suite $B/pb2/test_prefill_cuda 150 test_pb2 "$PAGE_CASES"
ab boxes2 8 d128-4x4k-p128,d128-4x4k-c-p128,d128-1x16k-c-p128,d128-1x2k+30k-c-p128,d64-4x4k-c-p128,d128-4x4k-p256,d128-4x4k-c-p16,d128-4x4k-p16,d128-skew-c-p16,d128-1x2k+30k-c-p16,d64-16x1k-c-p16,d64-4x4k-c-p16,d128-4x4k,d128-4x4k-c,d128-1x16k-c,d128-1x2k+30k-c \
  pb2=@$B/pb2/libflashserve_c.so
ab gd4 8 d128-4x4k-p16,d128-4x4k-c-p16,d128-1x16k-c-p16,d128-skew-c-p16 gd4=@$B/gd4/libflashserve_c.so
[ -f $B/pv/libflashserve_c.so ] && ab pv 8 d128-4x4k,d128-4x4k-c,d128-1x16k-c,d128-16x1k pv=@$B/pv/libflashserve_c.so
SAN_KERNELS=prefill_sm90_ws sanitize memcheck $((SLIM ? 60 : 70)) $B/pb2/test_prefill_cuda PrefillCuda.BigPages memcheck
SAN_KERNELS=prefill_sm90_ws sanitize synccheck $((SLIM ? 45 : 60)) $B/pb2/test_prefill_cuda PrefillCuda.BigPages synccheck
[ "$SLIM" = 1 ] || SAN_KERNELS=prefill_sm90_ws sanitize racecheck 70 $B/pb2/test_prefill_cuda PrefillCuda.BigPages racecheck
pack_out
