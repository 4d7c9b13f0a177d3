#!/usr/bin/env bash
# Session 44 call 2c: call2.sh's core for the device time left after refused starts: pb3's paged
# tests (BigPages, every page size, the grid, skewed batches), the ab against the tree (8 passes),
# memcheck and synccheck over BigPages.
B=build-s44a
source bench/results/call_prologue.sh
suite $B/pb3/test_prefill_cuda 120 test_pb3 "$PAGE_CASES"
ab boxes3 8 d128-4x4k-p128,d128-4x4k-c-p128,d128-1x16k-c-p128,d128-1x2k+30k-c-p128,d64-4x4k-c-p128,d128-4x4k-p256,d128-4x4k-c-p16,d128-4x4k-p16,d128-skew-c-p16,d128-1x2k+30k-c-p16,d64-16x1k-c-p16,d64-4x4k-c-p16,d128-4x4k,d128-4x4k-c,d128-1x16k-c,d128-1x2k+30k-c \
  pb3=@$B/pb3/libflashserve_c.so
SAN_KERNELS=prefill_sm90_ws sanitize memcheck 40 $B/pb3/test_prefill_cuda PrefillCuda.BigPages memcheck
SAN_KERNELS=prefill_sm90_ws sanitize synccheck 40 $B/pb3/test_prefill_cuda PrefillCuda.BigPages synccheck
pack_out
