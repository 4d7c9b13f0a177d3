#!/usr/bin/env bash
# Session 45 call 4, slim (little device time left), carry build-s45b (prep4.sh): the prefill grid
# and skewed batches on the tree's build; call4.sh's d 64 ab at 4 passes.
B=build-s45b
source bench/results/call_prologue.sh
prefill_grid $B/test_prefill_cuda
ab d64rule 4 d64-16x1k,d64-32x512,d64-16x1k-p16,d64-8x2k,d64-skew \
  m192=FLASHSERVE_PREFILL_WS_BLOCK_M=192 old=@$B/old/libflashserve_c.so
pack_out
