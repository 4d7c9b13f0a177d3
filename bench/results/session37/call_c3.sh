#!/usr/bin/env bash
# Session 37, call 3 (issue 22): build-c3/ from prep_c3.sh.
#  - prefill v4.25 (O into its TMA buffer by stmatrix, the default now; its SASS call 1's stsm
#    variant's, md5, measured there): the grid and skewed batches;
#  - the probe noo (O's stores left out: wrong outputs) traced with the finer stamps beside the
#    tree's trace: what O's stores cost an item (call 1: ssts 0.8-1.0 us of the
#    store's 1.0-1.2). Prediction: if the stores themselves are the cost, ssts -> ~0.1 us and
#    +3-6% on 16x1k; if ssts stays, its time is the finish (l's shuffles, the division, lse) or
#    issue slots taken by the other warpgroup's softmax;
#  - ahead (FLASHSERVE_PREFILL_WS_VIEW_AHEAD=1: in the dynamic walk the next item's slot and view
#    are read and made between the last P·V's issue and its wait, under the tensor core's work;
#    the tile loop the same, 8384 -> 8728 instructions at d 128): its grid tests, the ab, its trace.
#    Prediction: ndec 0.65 -> ~0.1 us and nwait ~0 on the trace; +2-4% on 16x1k and the causal
#    short rows (~0.5 of the boundary's ~2.2 us an item of ~13-15), level on 1x16k;
#  - fastdiv (FLASHSERVE_PREFILL_WS_FAST_DIV=1: the work order's and the pair's divisions by
#    multiply-highs, WsWorkOrderFast) and both (fastdiv + ahead) in the same ab. Prediction:
#    fastdiv +0.5-1.5% on the short rows (~0.1-0.2 us of ndec), both >= ahead.
B=build-c3
source bench/results/call_prologue.sh
prefill_grid $B/tests/test_prefill_cuda
mv "$out/test_prefill.log" "$out/test_prefill_main.log"
prefill_grid $B/ahead/tests/test_prefill_cuda
timeout 150 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 4 --only 0,1,3,21,24,18,16,4,6 \
  --config ahead=@$B/ahead/libflashserve_c.so --config fastdiv=@$B/fastdiv/libflashserve_c.so \
  --config both=@$B/both/libflashserve_c.so > "$out/ab_v425.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_v425.log"
timeout 120 python3 bench/trace_prefill.py --lib $B/trace/libflashserve_c.so --only 0,1,3,4 > "$out/trace.log" 2>&1
echo "$(el) trace rc $?"; cat "$out/trace.log"
timeout 120 python3 bench/trace_prefill.py --lib $B/trace_noo/libflashserve_c.so --only 0,1,3,4 > "$out/trace_noo.log" 2>&1
echo "$(el) trace noo rc $?"; cat "$out/trace_noo.log"
timeout 120 python3 bench/trace_prefill.py --lib $B/trace_ahead/libflashserve_c.so --only 0,1,3,4,6 > "$out/trace_ahead.log" 2>&1
echo "$(el) trace ahead rc $?"; cat "$out/trace_ahead.log"
pack_out
