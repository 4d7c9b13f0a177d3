#!/usr/bin/env bash
# Session 42 call 6 (issue 22), carry build-s42d (v4.33's library): run-time knobs against the
# defaults, 8 passes: O from registers (FLASHSERVE_PREFILL_WS_TMA_O=0) and one Q slot
# (_Q_SLOTS=1) where the instance has the O buffer (d 128's 128-key pages, d 64), and d 64's row
# tile forced (_BLOCK_M=128 / 192) on its short rows.
# Prediction (before the run): level (±1%) everywhere: each default was measured when it landed
# (v4.17, v4.18 on packed rows; v4.28's tile rule), the pages' O store never on its own.
B=${B:-build-s42d}
source bench/results/call_prologue.sh
ab knobs 8 d128-4x4k-c-p16,d128-skew-c-p16,d128-mix-c-p16,d64-16x1k,d64-16x1k-c,d64-16x1k-c-p16 \
  tmao0=FLASHSERVE_PREFILL_WS_TMA_O=0 q1=FLASHSERVE_PREFILL_WS_Q_SLOTS=1 \
  m128=FLASHSERVE_PREFILL_WS_BLOCK_M=128 m192=FLASHSERVE_PREFILL_WS_BLOCK_M=192
