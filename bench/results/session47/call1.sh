#!/usr/bin/env bash
# Session 47 call 1 (issue 22), carry build-s47 (prep1.sh: build-s46 = the tree at 13f4c50, v4.35,
# its library and test_prefill_cuda; ef/ = the rows' finish under the drain's last P·V,
# -DFLASHSERVE_PREFILL_WS_EARLY_FINISH=1 in d 128's, d 64's and d 256's bf16 packed instances and d
# 128's 176-key paged one, with its test_prefill_cuda; trace/ = the tree with
# -DFLASHSERVE_PREFILL_TRACE=ON). In order of need, as the device time may end the call early:
# 1. session 46's call 5's key tile rule (its own build against v4.34's launch, 176 keys forced;
#    prediction 4x4k +2.1%, 8x2k +3.2%, the skew +1.0%, controls level) and the tree's grid;
# 2. ef against the tree (prediction: +0.7-1.5% on the short rows, 16x1k, causal more; level on
#    1x16k; the finish is ~40 instructions an item a warpgroup off the item boundary) and ef's grid;
# 3. ab's paged and packed 4x4k rows interleaved pass by pass, bench_prefill's paged column beside;
# 4. the trace of the causal rows that trail FA3 (call2.sh);
# 5. session 46's call 6 (the work order's L2 budget; d 256 causal +-3%, the rest level).
set -uo pipefail
B=build-s47
source bench/results/call_prologue.sh
go() { [ $(( $(date +%s) - t0 )) -lt "$1" ] || { echo "$(el) skipped: past $1 s"; false; }; }  # a step only before $1 s
ab rule 8 d128-4x4k,d128-8x2k,d128-skew,d128-1x16k,d128-4x4k-p16 v434=FLASHSERVE_PREFILL_WS_BLOCK_N=176
suite $B/test_prefill_cuda 70 test_prefill_cuda 'Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches:PrefillCuda.BigPages'
go 330 && ab ef 8 d128-16x1k,d128-16x1k-c,d64-16x1k,d64-16x1k-c,d128-4x4k-c,d64-4x4k-c,d128-1x16k,d256-1x16k-c,d128-2x8k ef=@$B/ef/libflashserve_c.so
go 400 && suite $B/ef/test_prefill_cuda 70 test_prefill_ef 'Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches'
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
tar czf /tmp/all.tgz -C "$out" . && find "$out" -mindepth 1 -delete && mv /tmp/all.tgz "$out/out.tgz"
