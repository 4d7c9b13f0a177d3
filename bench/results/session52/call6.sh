#!/usr/bin/env bash
# Session 52 call 6 (issue 22), carry build-s51x (v4.37, the tree's library); run as
# `tar xJf build-s51x/b.tar.xz && bash bench/results/session52/call6.sh` (~60 s):
# what a call under stream capture runs (no dynamic walk's counters: one CTA an item,
# PERSISTENT=0) against the static walk on a persistent grid (SCHED=static with PERSISTENT=1), both
# against the default (the dynamic walk), 8 passes paired, on d 64's 64-row rows and d 128's short,
# causal and varlen rows. Prediction: the static persistent walk -2..-10% against the dynamic one
# (v4.9), but ahead of one CTA an item on the varlen batches (the grid order's empty items cost a
# CTA each there); if so, captured calls should take it.
B=build-s51
source bench/results/call_prologue.sh
set +e
ab capture 8 18,16,27,45,1,3,24,34 np=FLASHSERVE_PREFILL_WS_PERSISTENT=0 \
  sp=FLASHSERVE_PREFILL_WS_SCHED=static,FLASHSERVE_PREFILL_WS_PERSISTENT=1 > /dev/null
python3 bench/ab_paired.py "$out/ab_capture.log" 2>&1 | tail -10
pack_out
