#!/usr/bin/env bash
# Session 20 call 4: v4.12 (build-g20f) beside cuDNN and FA3 on the d 128 rows whose peers moved
# most between calls (bench/peer_check.py: every column in turn, 3 rounds, the SM clock logged).
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out
source scripts/gpu_peers.sh install
timeout 150 python3 bench/peer_check.py --lib build-g20f/libflashserve_c.so --rows 16x1k,4x4k --rounds 3 2>&1 | tee $out/peer_check.log
