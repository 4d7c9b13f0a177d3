#!/usr/bin/env bash
# Session 37, call 3 trimmed (for little device time): call_c3.sh's parts by importance,
# build-c3/ the same: the ab (ahead, fastdiv, both), ahead's grid tests, ahead's trace, the probe's.
B=build-c3
source bench/results/call_prologue.sh
timeout 60 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 3 --only 0,1,3,21,24,18,4,6 \
  --config ahead=@$B/ahead/libflashserve_c.so --config fastdiv=@$B/fastdiv/libflashserve_c.so \
  --config both=@$B/both/libflashserve_c.so > "$out/ab_v425.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_v425.log"
prefill_grid $B/ahead/tests/test_prefill_cuda
timeout 30 python3 bench/trace_prefill.py --lib $B/trace_ahead/libflashserve_c.so --only 0,1,3 > "$out/trace_ahead.log" 2>&1
echo "$(el) trace ahead rc $?"; cat "$out/trace_ahead.log"
timeout 25 python3 bench/trace_prefill.py --lib $B/trace_noo/libflashserve_c.so --only 0,1 > "$out/trace_noo.log" 2>&1
echo "$(el) trace noo rc $?"; cat "$out/trace_noo.log"
pack_out
