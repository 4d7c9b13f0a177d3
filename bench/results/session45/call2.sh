#!/usr/bin/env bash
# Session 45 call 2 (issue 22), carry build-s45a (prep2.sh): TMA page boxes in instances of their
# own (WsKv::kPageBoxes: d 64's two row tiles and d 128, bf16/fp16, no logit transform), the row
# gather's instances as in session 44's tree (SASS md5 identical).
# 1. test_prefill_cuda whole (BigPages asserts the boxes run where they should).
# 2. ab 8 passes: the tree against its row gather (FLASHSERVE_PREFILL_WS_PAGE_BOXES=0) and against
#    session 44's library (old). Prediction: 128/256-token pages +3-8% against both (call 1's pb3:
#    +3.2..+7.8%); 16-token pages and packed level against old (the same code), and gather = default
#    there (the switch does nothing below 128 tokens).
# 3. memcheck, synccheck, racecheck over BigPages.
# 4. d 64's 128-row tile (FLASHSERVE_PREFILL_WS_BLOCK_M=128) on non-causal rows, 6 passes (call 1:
#    16x1k +4.7%, 6/6); prediction: short rows gain (16x1k, 16x1k-p16), long (1x16k) lose.
B=build-s45a
source bench/results/call_prologue.sh
suite $B/test_prefill_cuda 170 test_prefill_cuda
ab boxes 8 d128-4x4k-p128,d128-4x4k-c-p128,d128-1x16k-c-p128,d128-1x2k+30k-c-p128,d128-16x1k-c-p128,d64-4x4k-c-p128,d64-4x4k-p128,d128-4x4k-p256,d128-4x4k-c-p16,d128-skew-c-p16,d128-1x2k+30k-c-p16,d64-16x1k-c-p16,d128-4x4k,d128-4x4k-c \
  gather=FLASHSERVE_PREFILL_WS_PAGE_BOXES=0 old=@$B/old/libflashserve_c.so
SAN_KERNELS=prefill_sm90_ws sanitize memcheck 70 $B/test_prefill_cuda PrefillCuda.BigPages memcheck
SAN_KERNELS=prefill_sm90_ws sanitize synccheck 60 $B/test_prefill_cuda PrefillCuda.BigPages synccheck
SAN_KERNELS=prefill_sm90_ws sanitize racecheck 70 $B/test_prefill_cuda PrefillCuda.BigPages racecheck
ab d64m128 6 d64-16x1k,d64-4x4k,d64-1x16k,d64-16x1k-p16,d64-skew-c,d64-4x4k-p128 m128=FLASHSERVE_PREFILL_WS_BLOCK_M=128
pack_out
