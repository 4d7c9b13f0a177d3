#!/usr/bin/env bash
# Session 40's second call (issue 22: the pages' gap), written in session 39: hardware counters
# (ncu: speed of light, memory, warp states, scheduler) of d 128 1x16k causal at the 176-key tile,
# packed against the row gather over 16- and 64-token pages (bench/ncu_paged.sh), on the tree's
# library (build-s40 from next_prep.sh). Session 39's calls 6-9: in pages the 176-key tile runs
# 0.91-0.92 of packed, the 128-key one 0.95-0.97, and neither the producer's spills, nor the ring's
# depth, nor the pages' order is the cause. What to read: the consumers' stall reasons (barrier /
# long scoreboard / MIO throttle) and the issue slots, packed against pages.
B=build-s40
source bench/results/call_prologue.sh
LIB=$B/libflashserve_c.so SHAPE="--batch 1 --len 16384 --causal" BLOCK_N=176 timeout 500 bash bench/ncu_paged.sh "$out"
echo "$(el) ncu rc $?"
pack_out
