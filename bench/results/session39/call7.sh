#!/usr/bin/env bash
# Session 39's seventh call (issue 22: pages against packed, after call 6's traces: 9-18% longer
# tiles in 16-token pages, the first K's wait 0.08 -> 0.23-0.30 us). build-s39f/: v4.28 and st3/,
# its d 128 128-key instances (packed and paged, bf16 and fp16) with three stages
# (FLASHSERVE_PREFILL_WS_STAGES_128=3: one Q slot, no O buffer, 224 KB of Q and stages; SASS
# 4896 instructions paged, 40 local loads; packed 4568, 2). Prediction (before the run): paged
# 128-key rows +3-8% if the ring's depth is what pages lack; packed rows -2..-5% (the second Q slot
# and the TMA store of O gone). No tests of st3 here: the outputs' cross-check only (ab's max |o - default's o|).
B=build-s39f
source bench/results/call_prologue.sh
timeout 150 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 6 \
  --only d128-4x4k-c-p16,d128-skew-c-p16,d128-mix-c-p16,d128-4x4k-c-p64,d128-4x4k-c,d128-16x1k-c \
  --config st3=@$B/st3/libflashserve_c.so > "$out/ab_st3.log" 2>&1
echo "$(el) ab st3 rc $?"; cat "$out/ab_st3.log"
