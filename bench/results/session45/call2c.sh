#!/usr/bin/env bash
# Session 45 call 2's core (carry build-s45a, prep2.sh), for little device time: the page cases of
# test_prefill_cuda, call2.sh's ab at 6 passes, memcheck and synccheck over BigPages.
B=build-s45a
source bench/results/call_prologue.sh
suite $B/test_prefill_cuda 120 test_prefill_pages "$PAGE_CASES"
ab boxes 6 d128-4x4k-p128,d128-4x4k-c-p128,d128-1x16k-c-p128,d128-1x2k+30k-c-p128,d64-4x4k-c-p128,d64-4x4k-p128,d128-4x4k-p256,d128-4x4k-c-p16,d128-skew-c-p16,d128-4x4k-c \
  gather=FLASHSERVE_PREFILL_WS_PAGE_BOXES=0 old=@$B/old/libflashserve_c.so
SAN_KERNELS=prefill_sm90_ws sanitize memcheck 70 $B/test_prefill_cuda PrefillCuda.BigPages memcheck
SAN_KERNELS=prefill_sm90_ws sanitize synccheck 60 $B/test_prefill_cuda PrefillCuda.BigPages synccheck
pack_out
