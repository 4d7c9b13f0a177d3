#!/usr/bin/env bash
# Session 52 call 5 (issue 22), carry build-s51x (session51/prep2.sh: v4.37, the tree's library);
# run as `tar xJf build-s51x/b.tar.xz && bash bench/results/session52/call5.sh` (~60 s):
# the run-time knobs of the walk and the store, measured before on the 128- and 192-row tiles,
# on the rows v4.37 gives the 64-row tile (two CTAs an SM), 8 passes paired against the defaults:
# the static walk (SCHED=static), O from registers (TMA_O=0), one Q slot (Q_SLOTS=1), one CTA an
# item (PERSISTENT=0). Prediction: each -1..-5% (the defaults won on the other tiles: v4.9's
# dynamic walk, v4.18's second Q slot, session 42's O by TMA), one CTA an item -3..-10% on the
# causal rows; any of them up would say the 64-row tile's items want less of the machinery.
B=build-s51
source bench/results/call_prologue.sh
set +e
ab knobs64 8 18,16,7,27,45,46 static=FLASHSERVE_PREFILL_WS_SCHED=static tmao0=FLASHSERVE_PREFILL_WS_TMA_O=0 \
  q1=FLASHSERVE_PREFILL_WS_Q_SLOTS=1 np=FLASHSERVE_PREFILL_WS_PERSISTENT=0 > /dev/null
python3 bench/ab_paired.py "$out/ab_knobs64.log" 2>&1 | tail -8
pack_out
