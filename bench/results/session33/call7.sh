#!/usr/bin/env bash
# Session 33 call 7 (issue 22): the paged d 128 instances' producer at 40 registers, consumers
# at 232 (pregs40: 4 local loads, 3 stores against 49 and 43 at 24/240; the consumers' tile loop
# 2621 instructions without local memory, as at 240), against main (v4.23), the paged rows, 5
# passes. Carry build-call7/.
B=build-call7
source bench/results/call_prologue.sh
timeout 150 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 --only 6,11,12,14,22,23,25,28 \
  --config pregs40=@$B/pregs40/libflashserve_c.so > "$out/ab_pregs.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_pregs.log" | grep -v again
