#!/usr/bin/env bash
# call1.sh cut to ~5 min for the 509 s of device time left: the candidate's test_prefill_cuda
# whole, its captured calls against v4.39's rule (3 passes) on d 128 16x1k causal, the skew
# causal packed and in 16-token pages, 4x4k causal, then test_fp8_cuda where time is left.
B=${B:-build-s55a}
[ -d "$B" ] || tar xJf build-s55p/b.tar.xz
source bench/results/call_prologue.sh
set +e
suite $B/test_prefill_cuda 150
timeout ${AB_SECS:-130} python3 bench/ab_prefill.py --lib "$B/libflashserve_c.so" --passes 3 \
  --only 1,24,25,3,21,28 --config graph=GRAPH=1 --config old=GRAPH=1,FLASHSERVE_PREFILL_WS_ZIGZAG=0 \
  > "$out/ab_zig.log" 2>&1
echo "$(el) ab zig rc $?"
python3 bench/ab_paired.py "$out/ab_zig.log" 2>&1 | tail -12
suite $B/test_fp8_cuda 60
pack_out
