#!/usr/bin/env bash
# Session 42's first call (issue 22), written in session 41, carry build-s42 (next_prep.sh): hpv
# (the half tile's last P·V over its 64 keys) with its test_prefill_cuda whole, then ab against
# v4.32, 10 passes, over d 128's packed 128-key rows (the 176-key and paged rows as controls).
# Prediction (before the run): 16x1k causal +0.5-1.5% (the first warpgroup's last P·V is on the
# item's tail), 200 short prompts +0.5-2%, long rows level; the drain's two injected arrives could
# cost as much.
B=build-s42
source bench/results/call_prologue.sh
suite $B/hpv/test_prefill_cuda 240 test_prefill_hpv
ROWS=d128-16x1k,d128-16x1k-c,d128-4x4k-c,d128-8x2k-c,d128-skew-c,d128-many,d128-many-c
ROWS=$ROWS,d128-4x4k,d128-1x16k-c,d128-4x4k-c-p16
ab hpv 10 $ROWS hpv=@$B/hpv/libflashserve_c.so
