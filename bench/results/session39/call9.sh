#!/usr/bin/env bash
# Session 39's ninth call (issue 22: where pages lose, after call 8: the pages' order does not
# matter, and in call 8 the 128-key rows in pages ran near packed, the 176-key ones 0.90). The
# rows that take the 176-key tile, in 16-token pages and packed, against the 128-key tile forced
# (FLASHSERVE_PREFILL_WS_BLOCK_N=128), v4.28, 6 passes. Prediction (before the run): in pages the
# 128-key tile level to +5% (the 176-key gather stages two rows a lane, kHalves 2), packed -5..-9%
# (session 18's 176-key gains).
B=build-s39f
source bench/results/call_prologue.sh
timeout 150 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 6 \
  --only d128-1x16k-c-p16,d128-4x4k-p16,d128-1x2k+30k-c-p16,d128-1x16k-c,d128-4x4k,d128-1x2k+30k-c \
  --config n128=FLASHSERVE_PREFILL_WS_BLOCK_N=128 > "$out/ab_n128.log" 2>&1
echo "$(el) ab n128 rc $?"; cat "$out/ab_n128.log"
