#!/usr/bin/env bash
# Session 50 call 3 (issue 22), carry build-s46/libflashserve_c.so (v4.35, the tree's kernels) and
# .whl/fa3 (scripts/gpu_peers.sh prepare): 1. bench/power_prefill.py: SM clock, power, FLOPs a cycle
# and energy a FLOP for ours, FA3 and cuDNN run back to back (d 256, d 128, d 64 rows), the question
# being whether a row loses by its FLOPs a cycle or by its clock under the power cap; 2. d 64 and
# d 256 beside cuDNN and FA3 (bench_prefill --quick, no FlashInfer: its JIT would take the call).
B=${B:-build-s46}
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
set +e
timeout 240 python3 bench/power_prefill.py --lib $B/libflashserve_c.so --seconds 2.5 --rounds 2 > "$out/power_prefill.log" 2>&1
echo "$(el) power rc $?"; cat "$out/power_prefill.log"
timeout 200 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 64,256 --no-extra \
  --rounds 3 --json "$out/peers_64_256.jsonl" > "$out/bench_prefill_peers_64_256.log" 2>&1
echo "$(el) bench rc $?"; tail -n 14 "$out/bench_prefill_peers_64_256.log"
pack_out
