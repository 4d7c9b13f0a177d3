#!/usr/bin/env bash
# One call on the GPU machine: the GPU tests, then the benchmarks next to the peers; a short
# table last. Expects a build made here for sm_90a in build-gpu/ (scripts/build_gpu.sh), carried
# along. Usage (on the GPU machine, from the repo root): bash scripts/gpu_check.sh [--quick]
set -uo pipefail
cd "$(dirname "$0")/.."
# cuBLAS comes from the machine's CUDA install (it has no static library here).
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out="${OUT:-/tmp/flashserve-gpu}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$out/nvidia-smi.txt"
status=0
for t in build-gpu/tests/test_decode_cuda build-gpu/tests/test_kv_storage_cuda build-gpu/tests/test_prefill_cuda build-gpu/tests/test_model_cuda build-gpu/tests/test_sampler_cuda; do
  echo "== $t"
  "$t" --gtest_brief=1 2>&1 | tee "$out/$(basename "$t").log" | tail -n 40
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
echo "== python binding on CUDA tensors"
PYTHONPATH=python FLASHSERVE_LIB=build-gpu/libflashserve_c.so python3 python/tests/test_torch_gpu.py 2>&1 | tee "$out/python_torch_gpu.log" | tail -n 12
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
build-gpu/bench/bench_kvcache 2>&1 | tee "$out/bench_kvcache.log" | tail -n 12
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
# Our Llama forward against Hugging Face's LlamaForCausalLM on the same folder (fp32).
mkdir -p "$out/hf" && build-gpu/server/hf_dump "$out/hf" >/dev/null && \
  python3 tools/hf_crosscheck.py "$out/hf" 2>&1 | grep -v -i warn | tail -n 2 || status=1
rm -f "$out/hf/model.safetensors" "$out/hf/logits_ours.f32"
build-gpu/bench/bench_model 2>&1 | tee "$out/bench_model.log" | tail -n 14
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
export PYTHONUNBUFFERED=1
# FLASHSERVE_BENCH picks the Python benchmarks (unset: both; empty: none); extra arguments go to each.
for b in ${FLASHSERVE_BENCH-prefill decode}; do
  python3 "bench/bench_$b.py" --lib build-gpu/libflashserve_c.so --json "$out/bench_$b.json" "$@" 2>&1 \
    | tee "$out/bench_$b.log" | tail -n 36
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
if [ "${FLASHSERVE_NCU:-0}" = 1 ] && command -v ncu >/dev/null; then
  # Hardware counters of one split-kernel launch and its merge at (1, 32k); clocks left as they are.
  timeout 180 ncu --clock-control none -k "regex:decode_split|merge_kernel" --launch-skip 2 --launch-count 2 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
    --section LaunchStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg \
    python3 bench/profile_decode.py --lib build-gpu/libflashserve_c.so > "$out/ncu_decode.txt" 2>&1
  grep -E "DRAM Throughput|Memory Throughput|Duration|Achieved Occupancy|Registers|Stall|Warp Cycles|sm__cycles_active" "$out/ncu_decode.txt" | head -30
  # The largest stall reasons (cycles per issued instruction).
  grep -E "issue_stalled" "$out/ncu_decode.txt" | sort -k3 -g -r | head -8
fi
exit $status
