#!/usr/bin/env bash
# Session 39's eighth call (issue 22: where pages lose, after calls 5-7: neither the producer's
# spills nor the ring's depth). The same rows with the pages' ids scattered (the benchmark's
# default) and in order (FLASHSERVE_BENCH_PAGES_IN_ORDER=1: each sequence's pages adjacent in the
# pool), v4.28, 4 passes each, back to back; packed rows beside. No prediction: a diagnosis (if
# pages in order run as packed, the cost is the memory system's, not the gather's code).
B=build-s39f
source bench/results/call_prologue.sh
R=d128-4x4k-c-p16,d128-4x4k-p16,d128-1x16k-c-p16,d128-4x4k-c,d128-4x4k,d128-1x16k-c
timeout 100 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 4 --only $R > "$out/ab_scattered.log" 2>&1
echo "$(el) scattered rc $?"; cat "$out/ab_scattered.log"
FLASHSERVE_BENCH_PAGES_IN_ORDER=1 timeout 100 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 4 --only $R \
  > "$out/ab_in_order.log" 2>&1
echo "$(el) in order rc $?"; cat "$out/ab_in_order.log"
