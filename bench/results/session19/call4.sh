#!/usr/bin/env bash
# Session 19 call 4: v4.11 as committed (SASS of the bf16 instances identical to call 2's E3):
# prefill tests, then bench_prefill beside cuDNN, FA3 and FlashInfer (the short table last).
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out
B=build-g19f
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
$B/tests/test_prefill_cuda --gtest_brief=1 > $out/test_prefill.log 2>&1; echo "prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' $out/test_prefill.log | tr '\n' ' ')"
source scripts/gpu_peers.sh install
fi_flag=""; python3 -c "import flashinfer" 2>/dev/null && fi_flag=--flashinfer
timeout 470 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick $fi_flag --json $out/bench_prefill.json > $out/bench_prefill.log 2>&1
echo "bench rc $?"
tail -n 26 $out/bench_prefill.log
