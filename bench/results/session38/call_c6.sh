#!/usr/bin/env bash
# Session 38, call 6 (issue 22), H200: the fast division (FLASHSERVE_PREFILL_WS_FAST_DIV=1) again,
# alone against the default, 8 passes (call 3's 4 passes, medians: -0.8 / +2.2 / +1.1 / 0 / +1.7
# / -2.9 / +2.4 / +1.3% on rows 0,1,3,21,24,18,4,6: inside the noise on most), and its own grid
# tests (a landing needs them). build-c6/: build-gpu's library, build-var/fastdiv's library and
# test_prefill_cuda.
B=build-c6
source bench/results/call_prologue.sh
prefill_grid $B/fastdiv/tests/test_prefill_cuda
timeout 200 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 8 --only 0,1,3,21,24,18,4,6 \
  --config fastdiv=@$B/fastdiv/libflashserve_c.so > "$out/ab_fastdiv.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_fastdiv.log"
pack_out
