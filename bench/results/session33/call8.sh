#!/usr/bin/env bash
# Session 33 call 8 (issue 25): the FP8 producer's conversion without the store-order swap
# (fp8noswap: -DWS_FP8_NOSWAP, threads c >= 4 store their even chunk first like the others: 2-way
# bank conflicts on the fp16 stores, 128 SELs a tile pair fewer; the conversion loop 664
# instructions against 775) against main (v4.23), the FP8 rows, 5 passes. Carry build-call8/.
B=build-call8
source bench/results/call_prologue.sh
timeout 100 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 --only 29,30,31 \
  --config fp8noswap=@$B/fp8noswap/libflashserve_c.so > "$out/ab_fp8noswap.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_fp8noswap.log"
