#!/usr/bin/env bash
# Session 42 call 3 (issue 22), carry build-s42c: the tree (the varlen walk for batches of more
# sequences than the CTA caches: its q tile prefix alone in the offsets' room, up to 3·kSeqCache - 1
# sequences; the prefix from one load a sequence) with its test_prefill_cuda whole, then ab 8 passes
# against v4.32 (v432: build-peers' library, main's SASS before the change).
# Prediction (before the run): 200 short prompts +3-8% (d 128's 128-key instance caches 158
# sequences: the grid order claimed ~4 q tiles a sequence of which ~1.5 do not exist), every other
# row level (the cached walk's prefix loop changed: once a CTA).
B=build-s42c
source bench/results/call_prologue.sh
suite $B/test_prefill_cuda 220 test_prefill_vl
ROWS=d128-many-c,d128-many,d128-skew-c,d128-skew,d128-mix-c-p16,d128-16x1k-c,d128-4x4k-c,d64-16x1k-c,d64-skew-c
ROWS=$ROWS,d64-4x4k-c,d128-1x16k-c
ab vl 8 $ROWS v432=@$B/v432/libflashserve_c.so
