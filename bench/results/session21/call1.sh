#!/usr/bin/env bash
# Session 21 call 1: the row gather's 176-key tile (build-g21a; paged K/V take the wide tile by
# the rule packed ones do, from the caller's total_k hint). Tests; a same-run A/B against main
# (build-g20f = v4.12, the kernels main builds); the paged rows beside their packed ones under
# the 128-key tile forced, without the consumers' proxy fence (bench-only), and on the dynamic
# walk; traces (build-g21t, -DFLASHSERVE_PREFILL_TRACE=ON) of 4x4k causal and 2k over 30k, packed
# and paged, one CTA an item and dynamic. <= 8 files back.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out /tmp/w
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
A=build-g21a
timeout 150 $A/tests/test_prefill_cuda --gtest_brief=1 > /tmp/w/test_a.log 2>&1; echo "A prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/test_a.log | tr '\n' ' ')"
grep -E "Failure|FAILED|rror" /tmp/w/test_a.log | head -6
timeout 130 python3 bench/ab_prefill.py --lib $A/libflashserve_c.so --config main=@build-g20f/libflashserve_c.so 2>&1 | tee $out/ab_a_main.log
timeout 150 python3 bench/ab_prefill.py --lib $A/libflashserve_c.so --only 2,22,5,23,13,11,12,3,6,14 \
  --config w128=FLASHSERVE_PREFILL_WS_BLOCK_N=128 --config nofence=FLASHSERVE_PREFILL_WS_PROXY_FENCE=0 \
  --config p1=FLASHSERVE_PREFILL_WS_PERSISTENT=1 --config p1nof=FLASHSERVE_PREFILL_WS_PERSISTENT=1,FLASHSERVE_PREFILL_WS_PROXY_FENCE=0 2>&1 | tee $out/ab_a_paged.log
timeout 90 python3 bench/trace_prefill.py --lib build-g21t/libflashserve_c.so --only 3,6,13,11 \
  --config p1=FLASHSERVE_PREFILL_WS_PERSISTENT=1 2>&1 | tee $out/trace_a.log
cd /tmp/w && tar cJf $out/call1_logs.tar.xz *.log
