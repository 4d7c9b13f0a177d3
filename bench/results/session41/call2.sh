#!/usr/bin/env bash
# Session 41 call 2 (issue 22), carry build-s41b (prep2.sh): half (FLASHSERVE_PREFILL_WS_HALF_DIAG=1,
# every d 64 and d 128 128-key 16-bit instance: an item's last tile at 64 keys in a warpgroup none
# of whose rows sees past its first 64 keys) with its test_prefill_cuda whole, then ab against
# v4.31 (main's SASS), 8 passes.
# Prediction (before the run): causal short rows with 128-row tiles, where the first warpgroup's
# last tile is the diagonal's lower half: d 64 16x1k causal +2-4% (half that tile's exps and MMAs:
# ~1/9 of a warpgroup's tiles), d 128 16x1k causal +1-3%, 4x4k causal +0.5-1%, skew causal +1-2%,
# pages alike; d 64 1x16k causal (192-row tiles: some warpgroups see none of the last tile) level
# to +0.5%; non-causal rows and the 176-key tile (d 128 1x16k causal) level.
B=build-s41b
source bench/results/call_prologue.sh
suite $B/half/test_prefill_cuda 240 test_prefill_half
ROWS=d64-16x1k,d64-16x1k-c,d64-4x4k-c,d64-skew-c,d64-1x16k-c,d64-16x1k-c-p16,d64-4x4k-c-p16,d128-16x1k
ROWS=$ROWS,d128-16x1k-c,d128-4x4k-c,d128-8x2k-c,d128-skew-c,d128-1x16k-c,d128-4x4k-c-p16,d128-skew-c-p16,d128-many-c
ab half 8 $ROWS half=@$B/half/libflashserve_c.so
