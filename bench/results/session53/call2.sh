#!/usr/bin/env bash
# Session 53 call 2 (issue 22), on call 1's warm machine (build-s53 unpacked, the peers in /tmp/site):
# v4.37 beside the peers on the table's other rows: d 256, 2k over 30k in 16-token pages (and the
# peers' paged kernels), GQA 32/8 at 128k causal (~4 min with FlashInfer's d 256 JIT).
B=${B:-build-s53}
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
set +e
timeout 560 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 256 --flashinfer \
  --rounds 3 --json "$out/peers_256_extra.jsonl" > "$out/bench_prefill_peers_256_extra.log" 2>&1
echo "$(el) bench rc $?"; tail -n 12 "$out/bench_prefill_peers_256_extra.log"
pack_out
