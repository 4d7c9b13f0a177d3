#!/usr/bin/env bash
# Session 44 call 2c: call2.sh's core for the device time left after refused starts: pb3's paged
# tests (BigPages, every page size, the grid, skewed batches), the ab against the tree (8 passes),
# memcheck and synccheck over BigPages.
B=build-s44a
source bench/results/call_prologue.sh
timeout 120 $B/pb3/test_prefill_cuda --gtest_brief=1 \
  --gtest_filter='PrefillCuda.BigPages:PrefillCuda.PageSizesOneTo256:Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/*:PrefillCuda.SkewedVarlenBatches' \
  > $out/test_pb3.log 2>&1
echo "$(el) test pb3 rc $? $(grep -E '^\[  (PASSED|FAILED) ' $out/test_pb3.log | tr '\n' ' ')"
grep -E "Failure|FAILED" $out/test_pb3.log | head -8
ab boxes3 8 d128-4x4k-p128,d128-4x4k-c-p128,d128-1x16k-c-p128,d128-1x2k+30k-c-p128,d64-4x4k-c-p128,d128-4x4k-p256,d128-4x4k-c-p16,d128-4x4k-p16,d128-skew-c-p16,d128-1x2k+30k-c-p16,d64-16x1k-c-p16,d64-4x4k-c-p16,d128-4x4k,d128-4x4k-c,d128-1x16k-c,d128-1x2k+30k-c \
  pb3=@$B/pb3/libflashserve_c.so
SAN_KERNELS=prefill_sm90_ws sanitize memcheck 40 $B/pb3/test_prefill_cuda PrefillCuda.BigPages memcheck
SAN_KERNELS=prefill_sm90_ws sanitize synccheck 40 $B/pb3/test_prefill_cuda PrefillCuda.BigPages synccheck
pack_out
