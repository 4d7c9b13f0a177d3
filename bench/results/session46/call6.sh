#!/usr/bin/env bash
# Written in session 46 for the next (issue 22), carry build-s46/libflashserve_c.so (v4.35): the
# causal rows that trail FA3 most on the H200 (session 46 call 4: d 256 1x16k causal 680 against
# FA3's 779, 0.87, while non-causal leads 714 / 698; d 128 1x16k causal 0.97; d 64 1x16k causal
# 0.90) against the work order's L2 budget (ws_section: 32 MB of K/V a section, so 2 pairs at d 256
# 1x16k, 16 MB each; FLASHSERVE_PREFILL_WS_L2_MB=16: one pair, 48: three on the H200's 60 MB, 96:
# six; FLASHSERVE_PREFILL_WS_SECTION=0: all pairs, session 11's order). Run-time knobs, no build.
# At d 256 a 128 x 80 tile's K and V (80 KB) take ~1.75 us of MMAs at 790 TFLOP/s / 132 SMs: from
# HBM alone that would be ~6 TB/s, so the K/V a section shares in the L2 may set the pace there.
# Prediction: level at d 64 and d 128 (compute-bound from the L2); d 256 causal +-3%.
B=${B:-build-s46}
source bench/results/call_prologue.sh
ab l2knobs 6 d256-1x16k-c,d256-1x16k,d128-1x16k-c,d64-1x16k-c \
  mb16=FLASHSERVE_PREFILL_WS_L2_MB=16 mb48=FLASHSERVE_PREFILL_WS_L2_MB=48 mb96=FLASHSERVE_PREFILL_WS_L2_MB=96 \
  all=FLASHSERVE_PREFILL_WS_SECTION=0
pack_out
