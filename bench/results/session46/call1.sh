#!/usr/bin/env bash
# Session 46 call 1 (issue 22), carry build-s45c (session45/next_prep.sh): session 45's next_call.sh,
# the tree's page cases (BigPages refactored in session 45) in place of the grid alone.
# 1. The tree (v4.34): the prefill grid and skewed batches; d 64's non-causal row tile rule as the
#    default against the 192-row tile forced, 4 passes (session 45's call 4, not run then).
# 2. Page runs (pr): its page cases (PageRuns asserts the boxes run), then ab 8 passes against the
#    tree on 16/64-token pages with ids in order (FLASHSERVE_BENCH_PAGES_IN_ORDER=1: every tile a
#    run) and shuffled (no tile a run: every tile by the box walk's unpipelined row gather).
#    Floors as packed (compute-bound). Prediction: in order +5-8% as 128-token pages' boxes (one
#    box of 8 pages makes the TMA unit the same 128 rows' requests as one of a page); shuffled
#    -3..-10% (each tile's ids read and staged as its K is issued, not a tile ahead).
# 3. memcheck, synccheck over PageRuns on pr.
B=build-s45c
source bench/results/call_prologue.sh
suite $B/test_prefill_cuda 150 test_tree "$PAGE_CASES"
ab d64rule 4 d64-16x1k,d64-32x512,d64-16x1k-p16,d64-8x2k m192=FLASHSERVE_PREFILL_WS_BLOCK_M=192
suite $B/pr/test_prefill_cuda 150 test_pr "$PAGE_CASES"
ROWS16=d128-4x4k-c-p16,d128-4x4k-p16,d128-1x2k+30k-c-p16,d128-skew-c-p16,d64-16x1k-c-p16,d64-4x4k-c-p16,d128-4x4k-c-p64,d128-1x2k+30k-c-p64
FLASHSERVE_BENCH_PAGES_IN_ORDER=1 ab runs_inorder 8 $ROWS16,d128-4x4k-c pr=@$B/pr/libflashserve_c.so
ab runs_shuffled 6 $ROWS16 pr=@$B/pr/libflashserve_c.so
SAN_KERNELS=prefill_sm90_ws sanitize memcheck 90 $B/pr/test_prefill_cuda PrefillCuda.PageRuns memcheck
SAN_KERNELS=prefill_sm90_ws sanitize synccheck 60 $B/pr/test_prefill_cuda PrefillCuda.PageRuns synccheck
pack_out
