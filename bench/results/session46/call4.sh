#!/usr/bin/env bash
# Session 46 call 4 (issue 22), carry build-s45c/libflashserve_c.so (the tree, v4.34) and .whl.
# 1. Pages against packed in the two harnesses: bench_prefill's paged column (4x4k, d 128, 16-token
#    pages; 5 rounds) read 0.80-0.82 of packed in call 2, ab_prefill's paged rows 0.90-0.97 in
#    call 1: both scripts' rows in one call, pages shuffled and in order.
# 2. The table's other rows with the peers: d 256, 2k over 30k (paged 16/64, the peers' paged),
#    GQA 32/8 at 128k causal.
B=build-s45c
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
set +e
timeout 60 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 128 --paged-only --rounds 5 \
  > "$out/bench_paged.log" 2>&1
echo "$(el) paged rc $?"; tail -n 4 "$out/bench_paged.log"
FLASHSERVE_BENCH_PAGES_IN_ORDER=1 timeout 60 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 128 \
  --paged-only --rounds 5 > "$out/bench_paged_inorder.log" 2>&1
echo "$(el) paged in order rc $?"; tail -n 4 "$out/bench_paged_inorder.log"
ab paged 8 d128-4x4k-c-p16,d128-4x4k-p16,d128-4x4k-c,d128-4x4k
timeout 400 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 256 --flashinfer \
  --rounds 3 --json "$out/peers_256_extra.jsonl" > "$out/bench_prefill_peers_256_extra.log" 2>&1
echo "$(el) bench rc $?"; tail -n 12 "$out/bench_prefill_peers_256_extra.log"
pack_out
