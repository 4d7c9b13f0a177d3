#!/usr/bin/env bash
# Session 52 call 1 (issue 22), carry build-s52x (prep1.sh: v4.38), build-s51x (session 51's
# prep2.sh: v4.37) and .whl/fa3; run as
# `tar xJf build-s52x/b.tar.xz && tar xJf build-s51x/b.tar.xz && bash bench/results/session52/call1.sh` (~420 s):
# (In the order of need, as device time may run short: ~420 s in all.)
# 1. the GPU prefill grid and skewed batches (each d 64 case: the 64-row tile with the carried
#    S(0) and without, FLASHSERVE_PREFILL_WS_CARRY=0, their bytes equal);
# 2. v4.38 against its second release point (CARRY=2: the stored item's Q slot at the drain's
#    end), the carry off and v4.37's library, on d 64's rows, 6 passes paired;
# 3. compute-sanitizer over the ws kernels on d 64 grid cases;
# 4. test_fp8_cuda, and bench_prefill at d 64 beside FA3 and cuDNN.
# Prediction (floors as session 51's: 16x1k causal 1.2 GB of K/V from the L2, 153 us, against
# 250 us measured; compute 0.14 ms at 790 TFLOP/s): +1-4% on the rows the 64-row tile takes
# (16x1k causal and not, 4x4k causal, 32x512, 64x300: an item of ~4.5 tiles loses the O store
# and S(0)'s latency from its boundary, ~0.3 of a tile), the carry off within 1% of v4.37 (one
# S thrown away an item, under the store), the 192-row rows level; CARRY=2 +0-1% on the rows of one- and two-tile items (16x1k causal).
B=build-s52
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
set +e
prefill_grid $B/test_prefill_cuda
ab carry 6 18,16,7,27,45,46,32 early=FLASHSERVE_PREFILL_WS_CARRY=2 off=FLASHSERVE_PREFILL_WS_CARRY=0 v437=@build-s51/libflashserve_c.so
python3 bench/ab_paired.py "$out/ab_carry.log" 2>&1 | tail -20
# d 64 grid cases: 30-35 (1 head, bf16, packed / 16 / 64-token pages), 48-50 (32 over 8, fp16).
G=Gpu/PrefillCudaGrid.MatchesReferenceAndCpu
SAN_KERNELS=prefill_sm90_ws sanitize memcheck 70 $B/test_prefill_cuda "$G/30:$G/31:$G/33:$G/48" memcheck
SAN_KERNELS=prefill_sm90_ws sanitize synccheck 50 $B/test_prefill_cuda "$G/30:$G/49" synccheck
SAN_KERNELS=prefill_sm90_ws sanitize racecheck 60 $B/test_prefill_cuda "$G/30" race30
suite $B/test_fp8_cuda 60 test_fp8_cuda
timeout 100 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 64 --no-extra > "$out/bench_d64.log" 2>&1
echo "$(el) bench rc $?"; tail -n 8 "$out/bench_d64.log"
pack_out
