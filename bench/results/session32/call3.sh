#!/usr/bin/env bash
# Session 32 call 3 (issue 22): which of v4.20's four changes cost d 128 (call 1: v4.20 -2..-6%
# against v4.18 at d 128, +3..+9% at d 64; with the plain run off, -2..-7% everywhere). Variants
# of the d 128 and d 64 bf16 objects (built by hand from build-gpu's, -D flags below), each the
# default v4.20 less one change: nobound (no block_boundary before the wait), noresc (O rescaled
# after S(t)'s issue as in v4.18), noshfl (K/V descriptors per thread), plainonly (all three
# off: the plain run alone); v418 main's library. The default library also has session 32's
# ws_wide rule (non-causal, max_q^2 >= 2048 total_q: row 26 by 176 keys). 5 passes, the
# rows at d 128 and d 64 that the ws kernel runs (not d 256, not FP8).
# Carry build-call3/ (the libraries).
B=build-call3
source bench/results/call_prologue.sh
timeout 400 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 \
  --only 0,1,2,3,4,5,6,8,11,12,13,14,15,16,17,19,20,21,22,23,24,25,26,27,28 \
  --config nobound=@$B/nobound/libflashserve_c.so --config noresc=@$B/noresc/libflashserve_c.so \
  --config noshfl=@$B/noshfl/libflashserve_c.so --config plainonly=@$B/plainonly/libflashserve_c.so \
  --config v418=@$B/v418/libflashserve_c.so > "$out/ab_v420_parts.log" 2>&1
echo "$(el) ab rc $?"; tail -3 "$out/ab_v420_parts.log"
