#!/usr/bin/env bash
# Session 27 call 1 (issue 22): the whole benchmark with all three peers (session 26's call2.sh,
# FlashInfer last measured in session 20). The skinny/model tests moved to call2.sh.
#  1. FlashInfer's JIT for d 64/128/256 (--parallel), checked against SDPA float32.
#  2. bench_prefill.py --quick --flashinfer: v4.17 beside cuDNN, FA3 and FlashInfer.
# Carry .whl, build-gpu/libflashserve_c.so.
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
set +e  # (the sourced script turns -e on: a timed-out check must not end the call)
python3 -c "import flash_attn_interface" && echo "FA3 importable"
timeout 230 python3 bench/flashinfer_check.py --dims 64,128,256 --parallel > "$out/fi_check.log" 2>&1
echo "$(el) flashinfer_check rc $?"; tail -n 8 "$out/fi_check.log"
left=$(( 575 - ($(date +%s) - t0) ))
timeout $left python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --flashinfer \
  --json "$out/bench_prefill.json" > "$out/bench_prefill.log" 2>&1
echo "$(el) bench_prefill rc $?"
tail -n 24 "$out/bench_prefill.log"
