#!/usr/bin/env bash
# Session 44 call 2 (issue 22), carry build-s44a (prep2.sh): TMA page boxes, pb3 (call 1's pb2
# with the producer's walk split in two loops, so the row gather's tile loop is the tree's).
# 1. pb3's whole test_prefill_cuda (the flipped default's tests: BigPages, every page size, the
#    grid, skewed batches, everything else).
# 2. ab 8 passes, pb3 against the tree: pages of 128/256 tokens, 16-token pages, packed controls.
#    Prediction (before the run): 128/256-token pages +4-8% as pb2 (call 1); 16-token pages level
#    (call 1's pb2: -1.6..-2.3% on the 128-key rows, whose gather loop is now the tree's; the walk
#    +10 local loads an item).
# 3. memcheck, synccheck, racecheck over BigPages on pb3.
# 4. session 42's call 6 (not run then): the run-time knobs against the tree's defaults, 6 passes:
#    O from registers (FLASHSERVE_PREFILL_WS_TMA_O=0), one Q slot (_Q_SLOTS=1), d 64's row tile
#    forced (_BLOCK_M=128 / 192). Prediction: level (+-1%) everywhere; each default was measured
#    when it landed, the pages' O store never on its own.
B=build-s44a
SLIM=${SLIM:-0}
source bench/results/call_prologue.sh
suite $B/pb3/test_prefill_cuda 170 test_pb3
ab boxes3 8 d128-4x4k-p128,d128-4x4k-c-p128,d128-1x16k-c-p128,d128-1x2k+30k-c-p128,d64-4x4k-c-p128,d128-4x4k-p256,d128-4x4k-c-p16,d128-4x4k-p16,d128-skew-c-p16,d128-1x2k+30k-c-p16,d64-16x1k-c-p16,d64-4x4k-c-p16,d128-4x4k,d128-4x4k-c,d128-1x16k-c,d128-1x2k+30k-c \
  pb3=@$B/pb3/libflashserve_c.so
SAN_KERNELS=prefill_sm90_ws sanitize memcheck 70 $B/pb3/test_prefill_cuda PrefillCuda.BigPages memcheck
SAN_KERNELS=prefill_sm90_ws sanitize synccheck 60 $B/pb3/test_prefill_cuda PrefillCuda.BigPages synccheck
[ "$SLIM" = 1 ] || SAN_KERNELS=prefill_sm90_ws sanitize racecheck 70 $B/pb3/test_prefill_cuda PrefillCuda.BigPages racecheck
[ "$SLIM" = 1 ] || ab knobs 6 d128-4x4k-c-p16,d128-skew-c-p16,d128-mix-c-p16,d64-16x1k,d64-16x1k-c,d64-16x1k-c-p16 \
  tmao0=FLASHSERVE_PREFILL_WS_TMA_O=0 q1=FLASHSERVE_PREFILL_WS_Q_SLOTS=1 \
  m128=FLASHSERVE_PREFILL_WS_BLOCK_M=128 m192=FLASHSERVE_PREFILL_WS_BLOCK_M=192
pack_out
