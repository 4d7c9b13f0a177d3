#!/usr/bin/env bash
# Session 41's first call (issue 22), written in session 40, carry build-s41 (next_prep.sh): the
# item's view from the producer (desc: FLASHSERVE_PREFILL_WS_ITEM_DESC=1, every d 64 and d 128
# 16-bit instance) with its test_prefill_cuda whole (the grid, the skewed and large batches, the
# dynamic walk's hand-overs of items without keys), then ab against v4.31, 8 passes.
# Prediction (before the run): d 64's short rows +1-3% (its items' own code is a third of 16x1k
# causal's samples; the fast division and the rows under S(0) paid 2-5%), d 128's short rows
# level to +1% (v4.21 was level there in session 33), long rows level.
B=build-s41
source bench/results/call_prologue.sh
suite $B/desc/test_prefill_cuda 240 test_prefill_desc
ROWS=d64-16x1k,d64-16x1k-c,d64-4x4k-c,d64-skew-c,d64-1x16k-c,d64-16x1k-c-p16,d128-16x1k,d128-16x1k-c,d128-4x4k-c
ROWS=$ROWS,d128-skew-c,d128-1x16k-c,d128-4x4k-c-p16,d128-mix-c-p16,d128-many-c
timeout 220 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 8 --only $ROWS \
  --config desc=@$B/desc/libflashserve_c.so > "$out/ab_desc.log" 2>&1
echo "$(el) ab desc rc $?"; grep -v again "$out/ab_desc.log"
