#!/usr/bin/env bash
# Next session's second call (issue 22), written in session 31 after its budget ran out:
#  1. the key tile on the rows where session 31's bench_prefill (and session 25's) read the
#     176-key tile above the default 128: the skewed batches (one 8k prompt among 63 short ones:
#     ws_wide's mean keys a sequence, 420, picks 128 though 93% of the work is the 8k prompt;
#     s31: 524 vs 500 non-causal, 465 vs 427 causal; s25: 546 vs 524, 462 vs 441), 16x1k
#     (463 vs 450), 4x4k causal (504 vs 487); 16x1k causal (128 ahead, 326 vs 302) and the mix as
#     controls. 3 passes, both tiles forced and the default.
#  2. the FP8 producer at 56 registers against 40 (build-r40);
#  3. ncu of cuDNN's kernel at 16x1k (its name, launch shape, registers, shared memory, tensor
#     and memory throughput) and its launch shape at 1x16k: cuDNN is the one peer with no
#     short-sequence cost (582 at 16x1k, 581 at 1x16k; ours 450 / 631).
# Carry build-gpu/libflashserve_c.so, build-r40/libflashserve_c.so (with v4.20 and the FP8 producer
# at 56 registers applied, as in next1.sh).
source bench/results/call_prologue.sh
timeout 150 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 3 --only 24,26,25,28,0,3,1 \
  --config n176=FLASHSERVE_PREFILL_WS_BLOCK_N=176 --config n128=FLASHSERVE_PREFILL_WS_BLOCK_N=128 \
  > "$out/ab_keytile.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_keytile.log"
# Issue 25: the FP8 producer at 56 registers (fp8_producer_56regs.patch, applied too), against
# a library built with -DFLASHSERVE_PREFILL_WS_FP8_REGS=40 (session 29's; build-r40, see README).
[ -f build-r40/libflashserve_c.so ] && timeout 90 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 3 \
  --only 11,29,30,31 --config r40=@build-r40/libflashserve_c.so > "$out/ab_fp8_regs.log" 2>&1
echo "$(el) ab fp8 rc $?"; cat "$out/ab_fp8_regs.log" 2>/dev/null
FULL=${FULL:-0} bash bench/results/session31/call5.sh
