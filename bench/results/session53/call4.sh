#!/usr/bin/env bash
# Session 53 call 4 (issue 22), carry build-s53z (prep3.sh) and .whl/fa3; run as
# `tar xJf build-s53z/b.tar.xz && bash bench/results/session53/call4.sh` (~3 min):
# 1. what walking empty items costs (the static walk walks every q tile of the grid order; the
#    dynamic one only the tiles that exist, WsVarlenOrder): the eager dynamic walk with
#    FLASHSERVE_PREFILL_WS_VARLEN=0 (the grid order) on the ragged rows, 6 passes: an estimate of
#    what a static walk over WsVarlenOrder would give captured ragged calls (call 5: 200 short
#    prompts non-causal -31% on the static walk);
# 2. session 50's ncu (`session50/call_ncu.sh`: pipes, instructions, cycles, DRAM bytes) on
#    v4.37, whose 64-row tile d 64's short causal rows now take: rows 18 (d 64 16x1k causal) beside
#    cuDNN, 16 (4x4k causal), 8, 17, 3 beside FA3.
B=build-s53b
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
set +e
ab novarlen 6 35,34,24,26,27,25 novarlen=FLASHSERVE_PREFILL_WS_VARLEN=0 > /dev/null
python3 bench/ab_paired.py "$out/ab_novarlen.log" 2>&1 | tail -8
B=$B OUT=$out bash bench/results/session50/call_ncu.sh
