#!/usr/bin/env bash
# Session 54 call 4 (issue 22), carry build-s54p (prep4.sh: the tree's build with the zigzag
# static walk): test_prefill_cuda whole (the grid's static persistent runs take the zigzag order on
# causal rows of one length; CapturedCalls' d 64 rows too), then captured calls (GRAPH=1, 4 passes,
# paired against the eager call): the rule's launch (d 64: the zigzag static walk; d 128: one CTA
# an item), the round robin (ZIGZAG=0), and the zigzag static walk forced on a persistent grid
# (PERSISTENT=1: d 128's causal rows).
B=${B:-build-s54z}
[ -d "$B" ] || tar xJf build-s54p/b.tar.xz
source bench/results/call_prologue.sh
set +e
suite $B/test_prefill_cuda 200 test_prefill_cuda
go 330 && { ab zig 4 18,16,1,3,21,5,15 graph=GRAPH=1 graph_rr=GRAPH=1,FLASHSERVE_PREFILL_WS_ZIGZAG=0 \
  graph_zp=GRAPH=1,FLASHSERVE_PREFILL_WS_PERSISTENT=1 graph_rrp=GRAPH=1,FLASHSERVE_PREFILL_WS_PERSISTENT=1,FLASHSERVE_PREFILL_WS_ZIGZAG=0 > /dev/null
  python3 bench/ab_paired.py "$out/ab_zig.log" 2>&1 | tail -10; }
pack_out
