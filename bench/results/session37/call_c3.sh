#!/usr/bin/env bash
# Session 37, call 3 (issue 22): build-c3/ from prep_c3.sh.
#  - prefill v4.25 (O into its TMA buffer by stmatrix, the default now; SASS = call 1's stsm
#    variant but for 258 constant moves' unit, MOV against IMAD.MOV, in the 4 d 128 128-key
#    instances): the grid and skewed batches, then an ab against base (6830482) on the short
#    rows, 4 passes. Prediction: call 1's stsm column, level to +1.7%;
#  - the probe noo (O's stores left out: wrong outputs) in the same ab and traced with the finer
#    stamps beside the tree's trace: what O's stores cost an item (call 1: ssts 0.8-1.0 us of the
#    store's 1.0-1.2). Prediction: if the stores themselves are the cost, ssts -> ~0.1 us and
#    +3-6% on 16x1k; if ssts stays, its time is the finish (l's shuffles, the division, lse) or
#    issue slots taken by the other warpgroup's softmax.
B=build-c3
source bench/results/call_prologue.sh
prefill_grid $B/tests/test_prefill_cuda
timeout 150 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 4 --only 0,1,3,21,24,18,16 \
  --config base=@$B/base/libflashserve_c.so --config noo=@$B/noo/libflashserve_c.so > "$out/ab_v425.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_v425.log"
timeout 120 python3 bench/trace_prefill.py --lib $B/trace/libflashserve_c.so --only 0,1,3,4 > "$out/trace.log" 2>&1
echo "$(el) trace rc $?"; cat "$out/trace.log"
timeout 120 python3 bench/trace_prefill.py --lib $B/trace_noo/libflashserve_c.so --only 0,1,3,4 > "$out/trace_noo.log" 2>&1
echo "$(el) trace noo rc $?"; cat "$out/trace_noo.log"
pack_out
