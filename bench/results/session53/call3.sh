#!/usr/bin/env bash
# Session 53 call 3 (issue 22), carry build-s53z (prep3.sh); run as
# `tar xJf build-s53z/b.tar.xz && bash bench/results/session53/call3.sh` (~4 min):
# the captured calls' walk rule of calls 1's follow-ups (prefill_cuda.cu: the static persistent
# walk where the q lengths differ, packed or paged, where the call is not causal, and at d 64's 64-
# and 128-row tiles; else one CTA an item):
# 1. test_prefill_cuda whole (PrefillCuda.CapturedCalls now in 16-token pages too);
# 2. ab, 6 passes paired against the eager call (the dynamic walk): graph (the rule under capture)
#    and graph_np (one CTA an item, the rule before) on every row the rule moved (non-causal rows
#    of every head dim, d 256's first; d 64's short causal rows; paged ragged rows) and on rows it
#    kept (d 128 and d 256 causal, d 64 1x16k causal, 2k over 30k). Prediction: graph within
#    -3..+3% of eager on the moved non-causal and d 64 rows (graph_np -3..-25%), the paged skew
#    ~-35% (graph_np ~-56%), the kept rows as graph_np.
B=build-s53b
source bench/results/call_prologue.sh
set +e
suite $B/test_prefill_cuda 260 test_prefill_cuda
ab rule 6 9,4,22,36,26,35,7,15,17,33,45,46,47,18,16,32,19,40,25,28,1,3,5,8,10,11,21 graph=GRAPH=1 \
  graph_np=GRAPH=1,FLASHSERVE_PREFILL_WS_PERSISTENT=0 > /dev/null
python3 bench/ab_paired.py "$out/ab_rule.log" 2>&1 | tail -30
pack_out
