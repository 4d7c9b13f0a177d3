#!/usr/bin/env bash
# Written in session 57 for the next session (issue 22), carry build-s57q (session57/prep1.sh),
# ~6 min: the tree's GPU tests (prefill v4.41: CapturedCalls' six rounds, the captured pairs by
# default), the FLASHSERVE_PREFILL_WS_SERIAL variant's (its test_prefill_cuda: the grid runs every
# d 64 case on the 128-row tile, FLASHSERVE_PREFILL_WS_BLOCK_M=128, packed, paged, page boxes,
# with a logit transform; then the captured and varlen cases with that tile forced), then
# d 64's rows, 6 passes, paired: the default (64-row tile on short rows, 192 on long), the
# 128-row tile (m128), and the 128-row tile by the serial loop (serial, the variant's library).
# Prediction: serial 5-10% over m128 on the short causal rows (16x1k causal: the peeled first and
# last tiles gone, ~60% of the per-item consumer code; cuDNN's loop reads 0.352 against our
# 0.401 ms), level or behind on the long rows (the softmax no longer under the warpgroup's own
# P·V); against the default's 64-row tile, +0..+8% on 16x1k causal.
B=${B:-build-s57b}
[ -d "$B" ] || tar xJf build-s57q/b.tar.xz
source bench/results/call_prologue.sh
set +e
suite $B/test_prefill_cuda 170
suite $B/test_fp8_cuda 60
suite $B/serial/test_prefill_cuda 170 serial_test_prefill_cuda
FLASHSERVE_PREFILL_WS_BLOCK_M=128 suite $B/serial/test_prefill_cuda 90 serial_m128 '*Captured*:*Varlen*:*Skew*'
timeout $(( ${DL:-585} - $(date +%s) + t0 - 10 )) python3 bench/ab_prefill.py --lib "$B/libflashserve_c.so" --passes 6 \
  --only 18,7,32,33,27,44,45,46,16,8 --config m128=FLASHSERVE_PREFILL_WS_BLOCK_M=128 \
  --config serial=@$B/serial/libflashserve_c.so,FLASHSERVE_PREFILL_WS_BLOCK_M=128 > "$out/ab_serial.log" 2>&1
echo "$(el) ab serial rc $?"
python3 bench/ab_paired.py "$out/ab_serial.log" 2>&1 | tail -12
