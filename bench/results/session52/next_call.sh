#!/usr/bin/env bash
# For the next session (issue 22; written in session 52, not run): captured prefill calls timed
# directly (ab_prefill's GRAPH=1: the call captured into a CUDA graph and replayed). Carry
# build-s52y from session52/prep7.sh (it packs the tree's build, whatever it is); run as
# `tar xJf build-s52y/b.tar.xz && bash bench/results/session52/next_call.sh` (~90 s).
# Configurations, 6 passes paired against the eager default (the dynamic walk): `graph`, the tree's
# rule under capture (ragged packed batches on the static persistent walk, the rest one CTA an
# item); `graph_np`, one CTA an item for every call (the rule before 4e23cba); `graph_sp`, the
# static persistent walk for every call (paged ragged batches too, not measured yet).
# Rows: the ragged batches packed (d 64 and d 128 skew causal, d 128 skew non-causal, 200 short
# prompts) and paged (d 128 skew causal and the mix in 16-token pages), and uniform causal rows (d
# 64 and d 128 16x1k). Prediction (session 52 call 6's launches): graph on the packed ragged rows
# -15..-21% (graph_np -42..-73%); on the uniform rows graph = graph_np (-8..-20%); graph_sp on the
# paged ragged rows ahead of graph_np, if the paged walk skips empty items as the packed one does.
B=build-s52
source bench/results/call_prologue.sh
set +e
ab graph 6 27,24,26,34,25,28,18,1 graph=GRAPH=1 graph_np=GRAPH=1,FLASHSERVE_PREFILL_WS_PERSISTENT=0 \
  graph_sp=GRAPH=1,FLASHSERVE_PREFILL_WS_PERSISTENT=1 > /dev/null
python3 bench/ab_paired.py "$out/ab_graph.log" 2>&1 | tail -10
pack_out
