#!/usr/bin/env bash
# Session 40's ninth call (issue 22), carry build-s40f: v4.30 against lazy (FLASHSERVE_PREFILL_WS_LAZY=1:
# the running maxima move only by more than 2^8, and a consumer warp skips O's rescale where all
# its rows' factors are 1; d 64 and d 128 bf16 no-transform instances, packed and pages), its grid,
# ab 8 passes. SASS: the plain tile loop a warp, skipping the rescale, d 64 466 -> ~443
# instructions, d 128 510 -> ~458 (the loop with the vote and the branch: 477 / 524).
# Prediction (before the run): d 64 +1-4% (its plain loop issue-bound in part: ncu's `selected`
# 21%, `dispatch` 9%), d 128 +0-2% (v4.1's lazy rescale at d 128 was level).
B=build-s40f
source bench/results/call_prologue.sh
prefill_grid $B/lazy/test_prefill_cuda lazy
ROWS=d64-16x1k,d64-16x1k-c,d64-4x4k,d64-4x4k-c,d64-1x16k,d64-1x16k-c,d64-skew-c,d64-4x4k-c-p16
ROWS=$ROWS,d128-16x1k,d128-16x1k-c,d128-4x4k,d128-4x4k-c,d128-1x16k,d128-1x16k-c,d128-skew-c,d128-4x4k-c-p16
timeout 200 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 8 --only $ROWS \
  --config lazy=@$B/lazy/libflashserve_c.so > "$out/ab_lazy.log" 2>&1
echo "$(el) ab lazy rc $?"; grep -v again "$out/ab_lazy.log"
