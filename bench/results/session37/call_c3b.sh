#!/usr/bin/env bash
# Session 37, call 3 trimmed to the device time left (~245 s with the start): call_c3.sh's parts
# by importance, build-c3/ the same: the ab (v4.25 against base, ahead, the no-O probe), ahead's
# grid tests, ahead's trace, the probe's trace.
B=build-c3
source bench/results/call_prologue.sh
timeout 60 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 3 --only 0,1,3,21,24,18,4,6 \
  --config base=@$B/base/libflashserve_c.so --config ahead=@$B/ahead/libflashserve_c.so \
  --config noo=@$B/noo/libflashserve_c.so > "$out/ab_v425.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_v425.log"
prefill_grid $B/ahead/tests/test_prefill_cuda
timeout 30 python3 bench/trace_prefill.py --lib $B/trace_ahead/libflashserve_c.so --only 0,1,3 > "$out/trace_ahead.log" 2>&1
echo "$(el) trace ahead rc $?"; cat "$out/trace_ahead.log"
timeout 25 python3 bench/trace_prefill.py --lib $B/trace_noo/libflashserve_c.so --only 0,1 > "$out/trace_noo.log" 2>&1
echo "$(el) trace noo rc $?"; cat "$out/trace_noo.log"
pack_out
