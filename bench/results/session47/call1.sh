#!/usr/bin/env bash
# Session 47 call 1 (issue 22), carry build-s47x (prep1.sh; run as `tar xJf build-s47x/b.tar.xz && DL=560 bash THIS`: build-s46 = the tree at 13f4c50, v4.35,
# its library and test_prefill_cuda; ef/, ia/, efia/: the item boundary's switches; trace/ = the
# tree with -DFLASHSERVE_PREFILL_TRACE=ON). In order of need, as the device time may end the call early:
# 1. session 46's call 5's key tile rule (its own build against v4.34's launch, 176 keys forced;
#    prediction 4x4k +2.1%, 8x2k +3.2%, the skew +1.0%, controls level) and the tree's grid;
# 2. the item boundary (bench/history/prefill.md "Session 47"): ef (the rows' finish under the
#    drain's last P·V), ia (the next item's view made under it, the item handed over apart from
#    Q), both (efia, whose grid runs first). Prediction: ef +0.7-1.5%, ia +1.5-2.5% on the short
#    rows (16x1k, causal more), level on 1x16k;
# 3. ab's paged and packed 4x4k rows interleaved pass by pass, bench_prefill's paged column beside;
# 4. the trace of the causal rows that trail FA3 (d 64 and d 256 1x16k, causal and not);
# 5. session 46's call 6 (the work order's L2 budget; d 256 causal +-3%, the rest level).
set -uo pipefail
B=build-s47
source bench/results/call_prologue.sh
source bench/results/session47/boundary.sh
ab rule 8 d128-4x4k,d128-8x2k,d128-skew,d128-1x16k,d128-4x4k-p16 v434=FLASHSERVE_PREFILL_WS_BLOCK_N=176
suite $B/test_prefill_cuda 70 test_prefill_cuda 'Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches:PrefillCuda.BigPages'
# efia's grid first: the item ahead's hand-over is new synchronization (a hang shows as the timeout)
go 300 && suite $B/efia/test_prefill_cuda 70 test_prefill_efia 'Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches:PrefillCuda.FullyMaskedRowsAndLongSequences:PrefillCuda.MaskOptions:PrefillCuda.HeadDim256'
ROWS=d128-16x1k,d128-16x1k-c,d64-16x1k,d64-16x1k-c,d128-4x4k-c,d64-4x4k-c,d128-1x16k,d256-1x16k-c,d128-many-c,d128-skew-c
go 370 && boundary 6 $ROWS
go 420 && timeout 60 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 8 --interleave \
  --only d128-4x4k-c-p16,d128-4x4k-c,d128-4x4k-p16,d128-4x4k > "$out/ab_interleaved.log" 2>&1
echo "$(el) ab interleaved rc $?"; grep -v again "$out/ab_interleaved.log"
go 450 && timeout 50 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 128 --paged-only --rounds 5 \
  > "$out/bench_paged.log" 2>&1
echo "$(el) bench paged rc $?"; tail -n 4 "$out/bench_paged.log"
go 470 && timeout 60 python3 bench/trace_prefill.py --lib $B/trace/libflashserve_c.so --dump "$out/npz" \
  --only d64-16x1k,d64-16x1k-c,d64-1x16k,d64-1x16k-c,d256-1x16k,d256-1x16k-c \
  > "$out/trace.log" 2>&1
echo "$(el) trace rc $?"; grep -v again "$out/trace.log"
go 520 && ab l2knobs 3 d256-1x16k-c,d256-1x16k,d128-1x16k-c,d64-1x16k-c \
  mb16=FLASHSERVE_PREFILL_WS_L2_MB=16 mb48=FLASHSERVE_PREFILL_WS_L2_MB=48 \
  all=FLASHSERVE_PREFILL_WS_SECTION=0
pack_out
