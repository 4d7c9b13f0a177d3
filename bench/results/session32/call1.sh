#!/usr/bin/env bash
# Session 32 call 1 (issues 22, 25): session 31's next1.sh and next2.sh in one call (one cold
# start): v4.20 (v420_plain_tiles.patch) and the FP8 producer at 56 registers
# (fp8_producer_56regs.patch), both applied and built before the call; then the key tile, the
# FP8 registers against build-r40, and ncu of cuDNN at 16x1k (call5.sh, FULL=0).
# Carry build-gpu/libflashserve_c.so, build-gpu/tests/test_prefill_cuda, build-gpu/tests/test_fp8_cuda,
# build-v418/libflashserve_c.so, build-r40/libflashserve_c.so.
bash bench/results/session31/next1.sh
B=build-gpu bash -c 'sed -n "/^source/,\$p" bench/results/session31/next2.sh > /tmp/n2.sh; bash /tmp/n2.sh'
