#!/usr/bin/env bash
# Next session's short call (issue 22), carry build-s47x (session47/prep1.sh), run as
# `tar xJf build-s47x/b.tar.xz && bash bench/results/session49/next_call.sh` (~200 s):
# 1. the power cap (session 49's trace: d 256 at 1.45-1.47 GHz on an H100): nvidia-smi's SM clock
#    and power every 100 ms beside ab's long rows, so a row's clock and watts read next to its
#    TFLOP/s ($out/smi.csv; the rows' order is ab's log's);
# 2. the section's L2 budget again, 8 passes on the causal rows where 3 passes read +3..+6%
#    (d 256 and d 128 at 48 MB, d 64 at 16 MB; predicted: within +-2% once paired over 8).
set -uo pipefail
B=build-s47
source bench/results/call_prologue.sh
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 100 > "$out/smi.csv" &
smi=$!
ab l2knobs8 8 d256-1x16k-c,d256-1x16k,d128-1x16k-c,d64-1x16k-c,d64-4x4k-c \
  mb16=FLASHSERVE_PREFILL_WS_L2_MB=16 mb48=FLASHSERVE_PREFILL_WS_L2_MB=48
kill "$smi" 2>/dev/null
python3 bench/ab_paired.py "$out/ab_l2knobs8.log" 2>&1 | tail -8
pack_out
