#!/usr/bin/env bash
# Session 46 call 2 (issue 22), carry build-s45c/libflashserve_c.so (the tree, v4.34) and .whl
# (scripts/gpu_peers.sh prepare, prepare-flashinfer): v4.34 beside cuDNN, FA3 and FlashInfer 0.7.2
# at d 128 and d 64 (no extra rows; session 42 call 5's table was v4.33 on an H100).
B=${B:-build-s45c}
DIMS=${DIMS:-128,64}
tag=$(tr , _ <<<"$DIMS")
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
set +e
timeout 480 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims "$DIMS" --no-extra --flashinfer \
  --rounds 3 --json "$out/peers_$tag.jsonl" > "$out/bench_prefill_peers_$tag.log" 2>&1
echo "$(el) bench rc $?"; tail -n 24 "$out/bench_prefill_peers_$tag.log"
pack_out
