#!/usr/bin/env bash
# Session 22 call 3: v4.15 (build-g22a: v4.14 + paged K/V by the dynamic walk by default): its
# tests, then beside the peers (bench_prefill --quick --flashinfer: cuDNN and flash by SDPA, FA3,
# FlashInfer, every column 3 rounds, L2 flushed; the short table last).
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
B=build-g22a
timeout 100 $B/tests/test_prefill_cuda --gtest_brief=1 > $out/test_prefill.log 2>&1; echo "prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' $out/test_prefill.log | tr '\n' ' ')"
grep -E "Failure|FAILED" $out/test_prefill.log | head -4
source scripts/gpu_peers.sh install
fi_flag=""; python3 -c "import flashinfer" 2>/dev/null && fi_flag=--flashinfer
timeout 450 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick $fi_flag --json $out/bench_prefill.json > $out/bench_prefill.log 2>&1
echo "bench rc $?"
tail -n 18 $out/bench_prefill.log
