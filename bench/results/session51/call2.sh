#!/usr/bin/env bash
# Session 51 call 2 (issue 22), carry build-s51x (prep2.sh) and .whl/fa3; run as
# `tar xJf build-s51x/b.tar.xz && bash bench/results/session51/call2.sh` (~400 s):
# 1. test_prefill_cuda whole (the d 64 grid now runs the 64-row tile too: one CTA an item, and a
#    persistent grid of 2 or 6 CTAs), test_fp8_cuda;
# 2. the 64-row tile (FLASHSERVE_PREFILL_WS_BLOCK_M=64: one consumer warpgroup, two CTAs an SM)
#    against the default tile rule (192 or 128 rows) on d 64's rows, 6 passes;
# 3. compute-sanitizer over the ws kernels on d 64 grid cases (the 64-row runs among them);
# 4. bench_prefill at d 64 beside FA3 and cuDNN, default and under BLOCK_M=64.
# Predictions (floors: the L2 -> shared bytes of K/V, every item reading its keys' tiles, at
# session 50's 7.84 TB/s over all SMs, against the FLOPs at the tensor rate): the 64-row tile
# reads twice the 128-row tile's K/V bytes (3x the 192-row's); 16x1k causal 1.2 GB -> 153 us
# against its 250 us now (128 rows: 76 us), so +0-8% if the second CTA hides the item boundary;
# 4x4k causal 4.4 GB -> 565 us against 718 us now: -10..0%; 1x16k causal 17 GB -> 2.2 ms against
# 2.36 ms now: -25..-10% (L2-bound); non-causal long rows down alike; 32x512 and 64x300 level.
B=build-s51
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
set +e
suite $B/test_prefill_cuda 170 test_prefill_cuda
suite $B/test_fp8_cuda 100 test_fp8_cuda
ab m64 6 18,16,8,7,15,17,27,32,19,40,44,45,46,47 m64=FLASHSERVE_PREFILL_WS_BLOCK_M=64
python3 bench/ab_paired.py "$out/ab_m64.log" 2>&1 | tail -16
# d 64 grid cases: 30-35 (1 head, bf16, packed / 16 / 64-token pages), 48-50 (32 over 8, fp16).
SAN_KERNELS=prefill_sm90_ws sanitize memcheck 70 $B/test_prefill_cuda 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/30:Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/31:Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/32:Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/33:Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/34:Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/35' memcheck
SAN_KERNELS=prefill_sm90_ws sanitize synccheck 50 $B/test_prefill_cuda 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/48:Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/49' synccheck
SAN_KERNELS=prefill_sm90_ws sanitize racecheck 50 $B/test_prefill_cuda 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/34' race34
timeout 100 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 64 --no-extra > "$out/bench_d64.log" 2>&1
echo "$(el) bench default rc $?"; tail -n 12 "$out/bench_d64.log"
FLASHSERVE_PREFILL_WS_BLOCK_M=64 timeout 100 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 64 \
  --no-extra > "$out/bench_d64_m64.log" 2>&1
echo "$(el) bench m64 rc $?"; tail -n 12 "$out/bench_d64_m64.log"
pack_out
