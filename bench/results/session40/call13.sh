#!/usr/bin/env bash
# Session 40's thirteenth call (issue 22), carry build-s40h: the library to land after the review
# (prefill v4.31: the packed instances without the row gather's slots, so d 128's packed 128-key
# one caches 158 sequences, not 70; packed d 128 batches of more take the 176-key tile; the rows'
# key ranges and the logits' constants made under S(0)) with test_prefill_cuda (two new cases:
# packed d 128 batches of 200, OutputsNot16ByteAligned in pages) and test_fp8_cuda; ab against
# v4.30 (base), and on the 200-prompt rows the 128-key tile forced (n128: without the cache).
# Prediction (before the run): init_rows +0.5-1.5% on d 64's short rows, level elsewhere; the
# 200-prompt rows: the default (176, cached, varlen walk) above n128 (uncached, grid order).
B=build-s40h
source bench/results/call_prologue.sh
for t in test_prefill_cuda test_fp8_cuda; do suite $B/$t 240; done
ROWS=d64-16x1k,d64-16x1k-c,d64-4x4k-c,d64-skew-c,d64-1x16k-c,d128-16x1k,d128-16x1k-c,d128-4x4k-c,d128-skew-c
ROWS=$ROWS,d128-1x16k-c,d128-4x4k-c-p16,d128-1x2k+30k-c-p16-e4m3,d256-1x16k-c,d128-many-c,d128-many
timeout 220 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 8 --only $ROWS \
  --config base=@$B/base/libflashserve_c.so --config n128=FLASHSERVE_PREFILL_WS_BLOCK_N=128 > "$out/ab_v431.log" 2>&1
echo "$(el) ab rc $?"; grep -v again "$out/ab_v431.log"
