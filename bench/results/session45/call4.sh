#!/usr/bin/env bash
# Session 45 call 4 (issue 22), carry build-s45b (prep4.sh): the tree as it lands.
# 1. test_prefill_cuda whole on the tree's build.
# 2. ab 6 passes, d 64 rows: the tree against its 192-row tile forced (the old rule's choice on
#    the non-causal short rows) and against bcc803c's library (old). Prediction: the short
#    non-causal rows (16x1k, 32x512, 16x1k in pages) +3-10% against both; 8x2k, the skew, 4x4k,
#    causal rows level against old (the same choice).
# 3. 128-token pages, 4 passes, the tree against its row gather: +5-8% as call 2.
B=build-s45b
source bench/results/call_prologue.sh
suite $B/test_prefill_cuda 170 test_prefill_cuda
ab d64rule 6 d64-16x1k,d64-32x512,d64-64x300,d64-16x1k-p16,d64-8x2k,d64-skew,d64-4x4k,d64-16x1k-c \
  m192=FLASHSERVE_PREFILL_WS_BLOCK_M=192 old=@$B/old/libflashserve_c.so
ab boxes 4 d128-4x4k-p128,d128-4x4k-c-p128,d64-4x4k-p128,d128-4x4k-c-p16 gather=FLASHSERVE_PREFILL_WS_PAGE_BOXES=0
pack_out
