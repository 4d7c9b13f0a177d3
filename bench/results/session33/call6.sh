#!/usr/bin/env bash
# Session 33 call 6 (issue 22): prefill v4.23 beside cuDNN, FA3 (tokenspeed-fa3) and FlashInfer
# 0.7.2 (fa3 backend, JIT-built here), bench_prefill --quick --dims 128,256 --flashinfer, same
# process, L2 flushed, 3 rounds. Carry build-call5/ (the library), .whl.
B=build-call5
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
set +e
timeout 480 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 128,256 --flashinfer --rounds 3 \
  --json "$out/peers.jsonl" > "$out/bench_prefill_peers.log" 2>&1
echo "$(el) bench rc $?"; tail -n 22 "$out/bench_prefill_peers.log"
