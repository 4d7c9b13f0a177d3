#!/usr/bin/env bash
# Session 43 call 2 (issue 22), carry build-s43a (prep1.sh, then pb/: the paged 128-key instances
# and prefill_cuda.cu with FLASHSERVE_PREFILL_WS_PAGE_BOXES=1, its test_prefill_cuda):
# 1. pb's tests on pages (BigPages: 128/256-token pages by TMA page boxes; every page size; the grid's paged cases).
# 2. ab 8 passes on pages of 128/256 tokens: pb (boxes, 128-key tiles) against the tree (the row
#    gather, its default tile) and the tree at 128 keys, packed rows beside.
#    Prediction (before the run): pb within 5% of the packed rows at 128 keys (the same TMA boxes;
#    two stages and the O buffer against packed's three), +8-20% over the tree's gather; the
#    16-token rows (the same instances, the producer's boxes compiled in) level.
# 3. call1.sh's gather diagnosis (gd1-3) and, if time is left, nothing else.
B=build-s43a
source bench/results/call_prologue.sh
suite $B/pb/test_prefill_cuda 150 test_pb "$PAGE_CASES"
ab boxes 8 d128-4x4k-p128,d128-4x4k-c-p128,d128-1x16k-c-p128,d128-1x2k+30k-c-p128,d64-4x4k-c-p128,d128-4x4k-p256,d128-4x4k,d128-4x4k-c,d128-1x16k-c,d128-4x4k-c-p16,d64-16x1k-c-p16 \
  pb=@$B/pb/libflashserve_c.so n128=FLASHSERVE_PREFILL_WS_BLOCK_N=128
ab gather 8 d128-4x4k-p16,d128-4x4k,d128-4x4k-c-p16,d128-1x16k-c-p16,d128-skew-c-p16 \
  gd1=@$B/gd1/libflashserve_c.so gd2=@$B/gd2/libflashserve_c.so gd3=@$B/gd3/libflashserve_c.so
pack_out
