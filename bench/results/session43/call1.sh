#!/usr/bin/env bash
# Session 43 call 1 (issue 22), carry build-s43a (prep1.sh): where the pages' gap is, 8 passes:
# the row gather's copies none (gd1), K's alone (gd2), each twice (gd3), against the tree on d
# 128's paged rows (packed controls beside them); then session 42's call6 knobs (O from
# registers, one Q slot, d 64's row tile forced).
# Prediction (before the run): gd1 within 3% of packed (the consumers' code is the same, the
# stages' waits gone), gd2 half-way, gd3 as far below the tree as the tree is below gd1 (the
# gather's cost is its issue, ~29% more instructions, session 40), if it is a rate; less if latency.
B=build-s43a
source bench/results/call_prologue.sh
ab gather 8 d128-4x4k-p16,d128-4x4k,d128-4x4k-c-p16,d128-4x4k-c,d128-1x16k-c-p16,d128-1x16k-c,d128-skew-c-p16 \
  gd1=@$B/gd1/libflashserve_c.so gd2=@$B/gd2/libflashserve_c.so gd3=@$B/gd3/libflashserve_c.so
ab knobs 8 d128-4x4k-c-p16,d128-skew-c-p16,d128-mix-c-p16,d64-16x1k,d64-16x1k-c,d64-16x1k-c-p16 \
  tmao0=FLASHSERVE_PREFILL_WS_TMA_O=0 q1=FLASHSERVE_PREFILL_WS_Q_SLOTS=1 \
  m128=FLASHSERVE_PREFILL_WS_BLOCK_M=128 m192=FLASHSERVE_PREFILL_WS_BLOCK_M=192
pack_out
