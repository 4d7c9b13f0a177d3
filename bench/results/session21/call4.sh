#!/usr/bin/env bash
# Session 21 call 4: does v4.13 cost the packed rows of the 176-key tile? Its consumers' loop
# there now holds the gathered stages' proxy fence behind a branch (+16 instructions a tile, 3484
# against 3468). Same-run A/B, three passes: main (build-g20f), v4.13 (build-g21a), and v4.13 with
# that fence compiled out of the 176-key instance (build-g21c; packed rows only: its paged
# 176-key runs would be unfenced).
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
timeout 200 python3 bench/ab_prefill.py --lib build-g21a/libflashserve_c.so --only 2,4,5,13,20,0 --passes 3 \
  --config main=@build-g20f/libflashserve_c.so --config nofence176=@build-g21c/libflashserve_c.so 2>&1 | tee $out/ab_176.log
