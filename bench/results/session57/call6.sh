#!/usr/bin/env bash
# Written in session 57 for the next session (issue 22), carry build-s57q (session57/prep1.sh),
# ~5 min, on call5.sh's warm machine or a fresh one: the serial loop at d 128
# (FLASHSERVE_PREFILL_WS_SERIAL=1 with FLASHSERVE_PREFILL_WS_HALF_DIAG=0 over d 128's 16-bit
# instances, build-s57b/serial128): its test_prefill_cuda, then d 128's rows, 6 passes, paired:
# the tree's default, nohalf (the overlapped loop built with HALF_DIAG=0, serial's baseline) and
# serial. Prediction: at d 128 the softmax is a smaller share of a tile than at d 64, so the lost
# overlap inside a warpgroup weighs more: serial behind nohalf by 0-5% on the long rows, ahead by
# 0-5% on 16x1k (8 tiles an item: the peeled first and last tiles gone).
B=${B:-build-s57b}
[ -d "$B" ] || tar xJf build-s57q/b.tar.xz
source bench/results/call_prologue.sh
set +e
suite $B/serial128/test_prefill_cuda 170 serial128_test_prefill_cuda
timeout $(( ${DL:-585} - $(date +%s) + t0 - 10 )) python3 bench/ab_prefill.py --lib "$B/libflashserve_c.so" --passes 6 \
  --only 1,0,21,20,3,2,5,4,24,6,42 --config nohalf=@$B/nohalf128/libflashserve_c.so \
  --config serial=@$B/serial128/libflashserve_c.so > "$out/ab_serial128.log" 2>&1
echo "$(el) ab serial128 rc $?"
python3 bench/ab_paired.py "$out/ab_serial128.log" 2>&1 | tail -13
