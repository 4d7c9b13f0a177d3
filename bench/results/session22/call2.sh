#!/usr/bin/env bash
# Session 22 call 2: v4.14 (build-g21d, the kernels of main 70cb094): is the dynamic walk for
# paged K/V (FLASHSERVE_PREFILL_WS_PERSISTENT=1, one CTA an item by default) a gain after all?
# Sessions 18, 20 and 21 read it level within ±5% in two passes; here four passes, the paged
# rows beside their packed ones.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
timeout 400 python3 bench/ab_prefill.py --lib build-g21d/libflashserve_c.so --passes 4 --only 3,6,14,2,22,5,23,13,11,12,17,19 \
  --config p1=FLASHSERVE_PREFILL_WS_PERSISTENT=1 2>&1 | tee $out/ab_p1.log
