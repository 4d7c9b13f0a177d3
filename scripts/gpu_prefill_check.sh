#!/usr/bin/env bash
# One call on the GPU machine for the prefill kernels: the GPU prefill tests, compute-sanitizer on
# a few grid cases (every kernel variant check_problem runs), same-run A/Bs, then the benchmark
# beside the peers (FA3 if carried in .whl/fa3, FlashInfer with --flashinfer if installed), the
# short table last. Expects build-gpu/ from scripts/build_gpu.sh (or its prefill targets) carried
# along. Usage: bash scripts/gpu_prefill_check.sh [steps] where steps is a comma list of
# test,san,ab,old,bench (default: test,san,ab,bench; old: every packed row of bench/ab_prefill.py
# against another build in build-gpu/old/, e.g. the last commit's, in the same process); logs
# under $OUT (default /tmp/flashserve-gpu).
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PYTHONUNBUFFERED=1
out="${OUT:-/tmp/flashserve-gpu}"
mkdir -p "$out"
steps=",${1:-test,san,ab,bench},"
T=build-gpu/tests/test_prefill_cuda
L=build-gpu/libflashserve_c.so
status=0
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
if [[ $steps == *,test,* ]]; then
  $T --gtest_brief=1 > "$out/test_prefill.log" 2>&1 || status=1
  grep -E "tests from|PASSED|FAILED" "$out/test_prefill.log" | tail -4
fi
if [[ $steps == *,san,* ]]; then
  # Grid cases 0, 34, 45, 46, 47: d 64 and 128, packed, pages of 16 and 64, GQA 8/2, causal;
  # memcheck and synccheck over every kernel variant check_problem runs. Racecheck over those
  # whole cases did not finish in 150-400 s (sessions 29-34), so it instruments the
  # warp-specialized kernels alone (--kernel-name; 2-5 s a case, session 34) on cases 9, 10, 21,
  # 22 (d 64 and 128, bf16, causal, packed and 16-token pages) and 0, 34, and on the FP8 prefill
  # tests (e4m3 by the copy path, e5m2 by the register path).
  cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
  for tool in memcheck synccheck; do
    filter=$cases
    [ "$tool" = memcheck ] && filter="${cases}PrefillCuda.HeadDim256"
    timeout 300 /usr/local/cuda/bin/compute-sanitizer --tool "$tool" $T --gtest_filter="$filter" > "$out/san_$tool.log" 2>&1
    echo "$tool: rc $? $(grep -E 'ERROR SUMMARY' "$out/san_$tool.log" | tail -1)"
  done
  ws=(/usr/local/cuda/bin/compute-sanitizer --tool racecheck --kernel-name kns=prefill_sm90_ws)
  timeout 300 "${ws[@]}" $T --gtest_filter="$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 9 10 21 22 0 34)" \
    > "$out/san_racecheck.log" 2>&1
  echo "racecheck (ws kernels): rc $? $(grep -E 'RACECHECK SUMMARY' "$out/san_racecheck.log" | tail -1)"
  timeout 120 "${ws[@]}" build-gpu/tests/test_fp8_cuda --gtest_filter='Fp8PrefillCuda.*' > "$out/san_racecheck_fp8.log" 2>&1
  echo "racecheck (ws kernels, FP8 pages): rc $? $(grep -E 'RACECHECK SUMMARY' "$out/san_racecheck_fp8.log" | tail -1)"
fi
if [[ $steps == *,ab,* ]]; then
  python3 bench/ab_prefill.py --lib $L --only 6,11,12,13,14,19 \
    --config v3=FLASHSERVE_PREFILL_KERNEL=wgmma 2>&1 | tee "$out/ab_paged.log" || status=1
fi
if [[ $steps == *,old,* ]]; then
  python3 bench/ab_prefill.py --lib $L --only 0,1,2,3,4,5,7,8,9,10,15,16 --config old=@build-gpu/old/libflashserve_c.so \
    2>&1 | tee "$out/ab_old.log" || status=1
fi
if [[ $steps == *,bench,* ]]; then
  # shellcheck disable=SC1091
  source scripts/gpu_peers.sh install
  fi_flag=""
  python3 -c "import flashinfer" 2>/dev/null && fi_flag=--flashinfer
  python3 bench/bench_prefill.py --lib $L --quick $fi_flag --json "$out/bench_prefill.json" > "$out/bench_prefill.log" 2>&1 || status=1
  tail -n 24 "$out/bench_prefill.log"
fi
exit $status
