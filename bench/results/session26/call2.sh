#!/usr/bin/env bash
# Session 26 call 2 (issue 22): prefill v4.16 beside cuDNN, FA3 and FlashInfer in one run, the
# issue's whole benchmark (FlashInfer last measured in session 20 beside v4.12). Built here:
# bash scripts/build_gpu.sh; bash scripts/gpu_peers.sh prepare and prepare-flashinfer. Carry .whl
# (FA3 23 MB + FlashInfer 14 MB) and build-gpu/libflashserve_c.so.
# Steps: FlashInfer's JIT for d 64, 128, 256 bf16 in one ninja run (16 cores), checked against
# SDPA in float32; then bench_prefill.py --quick --flashinfer (L2 flushed before each call, 3
# rounds, medians), the short table last.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
source scripts/gpu_peers.sh install
python3 -c "import flash_attn_interface" && echo "FA3 importable"
t0=$(date +%s)
timeout 240 python3 bench/flashinfer_check.py --dims 64,128,256 --parallel > "$out/fi_check.log" 2>&1
echo "flashinfer_check rc $? in $(( $(date +%s) - t0 )) s"; tail -n 8 "$out/fi_check.log"
timeout 320 python3 bench/bench_prefill.py --lib build-gpu/libflashserve_c.so --quick --flashinfer \
  --json "$out/bench_prefill.json" > "$out/bench_prefill.log" 2>&1
echo "bench_prefill rc $?"
tail -n 20 "$out/bench_prefill.log"
