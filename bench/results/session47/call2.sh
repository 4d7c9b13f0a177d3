#!/usr/bin/env bash
# Session 47 call 2 (issue 22; run inside call1.sh), carry build-trace/libflashserve_c.so (prep_trace.sh: the tree at
# 13f4c50 configured with -DFLASHSERVE_PREFILL_TRACE=ON, bench-only). Where the causal rows that
# trail FA3 lose (session 46 call 4, H200: ours causal ÷ non-causal at 1x16k d 64 0.94, d 128 0.96,
# d 256 0.95, while FA3's reads 1.02, 1.00, 1.12): the anatomy of 1x16k causal and non-causal at each
# head dim, d 64 4x4k and 16x1k causal: the main loop's pace a tile (is a causal tile slower: the
# mask, the diagonal), an item's fixed phases, the SMs' tail (the dynamic walk's balance), busy.
# Records kept (--dump) for the per-item and per-SM view offline. Prediction: the pace a tile equal
# within 1% causal or not; the causal rows' loss in the tail and in the item boundary
# (twice the items' share of the time).
set -uo pipefail
B=build-trace
source bench/results/call_prologue.sh
timeout 240 python3 bench/trace_prefill.py --lib $B/libflashserve_c.so --dump "$out/npz" \
  --only d64-1x16k,d64-1x16k-c,d128-1x16k,d128-1x16k-c,d256-1x16k,d256-1x16k-c,d64-4x4k-c,d64-16x1k-c,d64-4x4k,d64-16x1k,d128-16x1k \
  > "$out/trace.log" 2>&1
echo "$(el) trace rc $?"; cat "$out/trace.log" | grep -v again
pack_out
