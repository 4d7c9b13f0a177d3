#!/usr/bin/env bash
# Session 53 call 4 (issue 22), carry build-s53w (prep4.sh) and build-s53z (prep3.sh); run as
# `tar xJf build-s53w/b.tar.xz && tar xJf build-s53z/b.tar.xz && bash bench/results/session53/call4.sh`
# (~3 min): the static walk over WsVarlenOrder (without counters, a capture, a batch of q lengths
# that differ walks only the q tiles that exist, handed to the consumers as the dynamic walk's;
# it walked every q tile of the grid order):
# 1. test_prefill_cuda whole on its build (the grid's static runs now take it on ragged cases;
#    the grid order's static walk by VARLEN=0 on the other seeds);
# 2. ab, 6 passes, paired against its eager call: captured (graph) against the kernels before
#    (old_graph: build-s53b, call 5's), and the eager call of the kernels before (old: the dynamic
#    walk's code moved, not its work) on ragged rows and two uniform ones. Prediction: graph
#    ahead of old_graph on the 200 short prompts (more sequences than the offsets' cache: ~41 empty
#    items of ~97 a CTA) by 10-20%, on the skewed batches by 2-6% (empty items cheap where cached;
#    what is left is the static walk's balance); old level with the default (+-2%).
B=build-s53c
source bench/results/call_prologue.sh
set +e
suite $B/test_prefill_cuda 200 test_prefill_cuda
ab varlen_static 6 35,34,24,26,27,25,28,18,3 graph=GRAPH=1 old_graph=@build-s53b/libflashserve_c.so,GRAPH=1 \
  old=@build-s53b/libflashserve_c.so > /dev/null
python3 bench/ab_paired.py "$out/ab_varlen_static.log" 2>&1 | tail -12
pack_out
