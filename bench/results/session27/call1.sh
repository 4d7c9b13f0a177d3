#!/usr/bin/env bash
# Session 27 call 1: the checks left from session 26, then issue 22's whole benchmark with all
# three peers (session 26's call2.sh, FlashInfer last measured in session 20).
#  1. (27) test_skinny_gemm_cuda, test_model_cuda with the default FLASHSERVE_SKINNY_PDL_FLAGS=4
#     (changed after their last run).
#  2. (22) FlashInfer's JIT for d 64/128/256 (--parallel), checked against SDPA float32.
#  3. (22) bench_prefill.py --quick --flashinfer: v4.17 beside cuDNN, FA3 and FlashInfer.
# Carry .whl, build-gpu/libflashserve_c.so, build-gpu/tests/{test_skinny_gemm_cuda,test_model_cuda}.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p "$out"
B=build-gpu
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
timeout 45 $B/tests/test_skinny_gemm_cuda > "$out/test_skinny.log" 2>&1
echo "$(el) skinny rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_skinny.log" | tr '\n' ' ')"
timeout 60 $B/tests/test_model_cuda > "$out/test_model.log" 2>&1
echo "$(el) model rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_model.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" "$out/test_skinny.log" "$out/test_model.log" | head -6
source scripts/gpu_peers.sh install
python3 -c "import flash_attn_interface" && echo "FA3 importable"
timeout 230 python3 bench/flashinfer_check.py --dims 64,128,256 --parallel > "$out/fi_check.log" 2>&1
echo "$(el) flashinfer_check rc $?"; tail -n 8 "$out/fi_check.log"
left=$(( 575 - ($(date +%s) - t0) ))
timeout $left python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --flashinfer \
  --json "$out/bench_prefill.json" > "$out/bench_prefill.log" 2>&1
echo "$(el) bench_prefill rc $?"
tail -n 24 "$out/bench_prefill.log"
