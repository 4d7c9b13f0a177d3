#!/usr/bin/env bash
# Session 25 call 1. Issue 22 first (the lowest open [GPU] issue), then issue 25 on the same
# warm machine (FA3 unpacked once). Built here: bash scripts/build_gpu.sh; main before v4.16
# (787f04d^) built into build-gpu/old/libflashserve_c.so; `bash scripts/gpu_peers.sh prepare`
# (FA3 only). HEAD with FLASHSERVE_DECODE_FP8_STAGES 4 and FLASHSERVE_DECODE_FP8_MIN_BLOCKS 3 built
# into build-gpu/v3/libflashserve_c.so. Carry .whl/fa3 (23 MB), build-gpu/libflashserve_c.so,
# build-gpu/old, build-gpu/v3.
# Steps (~7 min):
#  1. (22) v4.16 against v4.15 (main before the varlen walk), 3 passes, on the rows where
#     session 24 saw v4.16 lose (16x1k causal 0.94x, 16x1k non-causal 0.96-0.99x) and their
#     neighbours (8x2k, 4x4k, 4x4k paged 16) and one skew row: is the loss real?
#  2. (22) bench_prefill.py --quick: v4.16 beside cuDNN and FA3, L2 flushed, 3 rounds, medians
#     (FlashInfer left out: its JIT takes ~80 s a head dim; last measured in session 20 beside
#     v4.12). The short table (ours / best peer) last.
#  3. (25) bench_decode.py --fp8 e4m3 on the rows: our e4m3 pages beside our bf16 pages
#     and FA3's paged decode in bf16 and FP8 (the "ahead of both peers' FP8"); beside
#     them the A/B build v3: FP8 instances at 3 CTAs an SM (4 stages; d 128 168 registers, 48
#     bytes of stack, against 2 CTAs, 5 stages, 186): short splits pay a CTA's fixed cost at half
#     the bytes, so more CTAs an SM may hide it. Prediction: (256,1k) 1.59 -> 1.7-1.8x,
#     (1,32k) 1.40 -> 1.5x, (64,8k) level.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p "$out" /tmp/w
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
B=build-gpu
source scripts/gpu_peers.sh install
python3 -c "import flash_attn_interface" && echo "FA3 importable"
timeout 150 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --only 1,0,21,20,3,6,24 --passes 3 \
  --config v415=@$B/old/libflashserve_c.so 2>&1 | tee "$out/ab_v416_v415.log"
timeout 270 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --json "$out/bench_prefill.json" \
  > "$out/bench_prefill.log" 2>&1
echo "bench_prefill rc $?"
tail -n 18 "$out/bench_prefill.log"
timeout 150 python3 bench/bench_decode.py --lib $B/libflashserve_c.so --fp8 e4m3 --no-flex \
  --variant v3=$B/v3/libflashserve_c.so:3 --only "(64,8k)" --only "(128,2k)" --only "(256,1k)" --only "(1,32k)" --json "$out/bench_decode_fp8.json" \
  > "$out/bench_decode_fp8.log" 2>&1
echo "bench_decode rc $?"
tail -n 9 "$out/bench_decode_fp8.log"
