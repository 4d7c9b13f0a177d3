#!/usr/bin/env bash
# Session 40's first call (issue 22), written in session 39: build-s40/ from next_prep.sh. Three
# stages at d 128's 128-key tile (st3) on every row that takes that tile, 8 passes, and its grid.
# Prediction (session 39, before this run): packed 128-key rows +1-4% (call 7: 4x4k causal +4.3%,
# 16x1k causal +1.5%), pages level; if it holds, st3 lands for the packed instances only (pages
# keep two stages and the O buffer).
B=build-s40
source bench/results/call_prologue.sh
prefill_grid $B/st3/test_prefill_cuda st3
timeout 240 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 8 \
  --only d128-16x1k,d128-16x1k-c,d128-4x4k-c,d128-8x2k-c,d128-skew-c,d128-4x4k-c-p16,d128-skew-c-p16,d128-mix-c-p16 \
  --config st3=@$B/st3/libflashserve_c.so > "$out/ab_st3.log" 2>&1
echo "$(el) ab st3 rc $?"; cat "$out/ab_st3.log"
pack_out
