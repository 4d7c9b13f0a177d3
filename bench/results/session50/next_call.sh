#!/usr/bin/env bash
# Next session's first call (issue 22), carry build-s50x (`bash bench/results/session50/prep10.sh`
# first: the tree's build) and .whl/fa3; run as
# `tar xJf build-s50x/b.tar.xz && bash bench/results/session50/next_call.sh` (~250 s):
# 1. v4.36's L2 hints, Q's alone (2) against both (3, the default), 8 passes on the causal rows
#    (session 50 call 7: the K/V hint alone read like none; if 2 reads level, 2 is the safer
#    default: no evict_last lines left for the kernels after prefill where an L2 set-aside exists);
# 2. power_prefill.py after v4.36 (ours, FA3, cuDNN: pJ a FLOP on the rows session 50 measured
#    with v4.35; prediction: d 64 causal within ~4% of FA3's, d 64 16x1k causal within ~10% of
#    cuDNN's).
B=build-s50
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
set +e
ab hints 8 18,1,16,3,21,8,5,10,13,37,6 h2=FLASHSERVE_PREFILL_WS_L2_HINTS=2 h0=FLASHSERVE_PREFILL_WS_L2_HINTS=0
python3 bench/ab_paired.py "$out/ab_hints.log" 2>&1 | tail -13
timeout 260 python3 bench/power_prefill.py --lib $B/libflashserve_c.so --seconds 2.5 --rounds 2 \
  --row 64,1,16384,1 --row 64,16,1024,1 --row 64,4,4096,1 --row 128,16,1024,1 --row 128,1,16384,1 --row 256,1,16384,1 \
  > "$out/power_prefill.log" 2>&1
echo "$(el) power rc $?"; cat "$out/power_prefill.log"
pack_out
