#!/usr/bin/env bash
# Session 32 call 5 (issue 22): call 3 found block_boundary the costly change (nobound, v4.20
# less the boundary: 16x1k +6%, causal rows +2..+4% over v4.20), but every variant 2-4% under
# v4.18 on the long d 128 rows (1x16k, 2k over 30k). Is it the plain run there? nobound and
# plainonly each with the plain run off (FLASHSERVE_PREFILL_WS_PLAIN=0) beside v4.18.
# Default: the nobound library. Carry build-call5/.
B=build-call5
source bench/results/call_prologue.sh
timeout 150 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 \
  --only 0,1,2,3,4,5,6,8,11,13,15,17,20,21,24,26,28 \
  --config nobound_gen=FLASHSERVE_PREFILL_WS_PLAIN=0 --config plainonly=@$B/plainonly/libflashserve_c.so \
  --config plainonly_gen=@$B/plainonly/libflashserve_c.so,FLASHSERVE_PREFILL_WS_PLAIN=0 \
  --config v418=@$B/v418/libflashserve_c.so > "$out/ab_v420_plain.log" 2>&1
echo "$(el) ab rc $?"; tail -2 "$out/ab_v420_plain.log"
