#!/usr/bin/env bash
# Session 50 call 4 (issue 22), carry build-gpu/tools/bulk_rate, build-s46/libflashserve_c.so and
# .whl/fa3: 1. bench/power_bulk.py: the board's power for 16 KB TMA boxes on every SM, alone and
# multicast to pairs, from the L2 and from HBM, against a spin on every SM (pJ a byte received);
# 2. power_prefill.py on the rows call 3 left out (d 64 1x16k non-causal, 4x4k both, d 128 4x4k both).
B=${B:-build-s46}
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
set +e
timeout 60 python3 bench/power_bulk.py build-gpu/tools/bulk_rate 3 > "$out/power_bulk.log" 2>&1
echo "$(el) power_bulk rc $?"; cat "$out/power_bulk.log"
timeout 200 python3 bench/power_prefill.py --lib $B/libflashserve_c.so --seconds 2.5 --rounds 2 \
  --row 64,1,16384,0 --row 64,4,4096,1 --row 64,4,4096,0 --row 128,4,4096,1 --row 128,4,4096,0 \
  > "$out/power_prefill2.log" 2>&1
echo "$(el) power rc $?"; cat "$out/power_prefill2.log"
pack_out
