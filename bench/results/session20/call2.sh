#!/usr/bin/env bash
# Session 20 call 2: v4.12 = main + softmax_row_pair in the ws kernel (F, build-g20f: call 1's
# best); H (build-g20h) = F + the pair in v3 too (d 64 16×1k runs v3). Tests of H (F's ws
# kernel and H's v3), A/B of the v3 rows (H, F, main), then the better of H and F on those rows
# beside cuDNN, FA3 and FlashInfer (bench_prefill --quick --flashinfer, the short table last).
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
timeout 120 build-g20h/tests/test_prefill_cuda --gtest_brief=1 > $out/test_prefill_h.log 2>&1; echo "H prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' $out/test_prefill_h.log | tr '\n' ' ')"
grep -E "Failure|FAILED" $out/test_prefill_h.log | head -4
timeout 40 python3 bench/ab_prefill.py --lib build-g20h/libflashserve_c.so --only 7,18 --passes 3 \
  --config f=@build-g20f/libflashserve_c.so --config main=@build-g19L/libflashserve_c.so 2>&1 | tee $out/ab_v3_pair.log
B=$(python3 -c "
import sys
h=f=0.0
for l in open('$out/ab_v3_pair.log'):
    t=l.split()
    if len(t)>=7 and t[0]=='64' and t[1]=='16x1k': h+=float(t[4]); f+=float(t[5])
print('build-g20h' if h>f else 'build-g20f')")
echo "bench build: $B"
source scripts/gpu_peers.sh install
fi_flag=""; python3 -c "import flashinfer" 2>/dev/null && fi_flag=--flashinfer
timeout 470 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick $fi_flag --json $out/bench_prefill.json > $out/bench_prefill.log 2>&1
echo "bench rc $?"
tail -n 18 $out/bench_prefill.log
