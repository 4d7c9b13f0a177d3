#!/usr/bin/env bash
# Session 46 call 5 (issue 22), carry build-s46 (the tree with d 128's key tile rule of call 3:
# 176 keys at packed rows only from 8k keys a sequence, non-causal too; page runs' code gone, the
# ws SASS as v4.34's, md5; prep5.sh). ab 8 passes, the rule against v4.34's launch (176 keys
# forced: the ws SASS is v4.34's, so that is v4.34's launch on these rows) on the rows it moves
# (4x4k, 8x2k, the skew: 176 -> 128 keys) and controls (1x16k, 4x4k in 16-token pages: 176 both).
# Prediction: 4x4k +2.1%, 8x2k +3.2%, the skew +1.0%, the controls level.
# Then 4x4k paged and packed rows interleaved pass by pass (ab --interleave), 8 passes, and
# bench_prefill's paged column beside them (call 4: the harnesses' page ratios apart); last,
# test_prefill_cuda's grid, skewed batches and BigPages (70 s at most: the device time left).
B=build-s46
source bench/results/call_prologue.sh
ab rule 8 d128-4x4k,d128-8x2k,d128-skew,d128-1x16k,d128-4x4k-p16 v434=FLASHSERVE_PREFILL_WS_BLOCK_N=176
# 2x8k (176 keys by both rules): the tiles forced, as call 3
ab tile2x8k 8 d128-2x8k,d128-2x8k-c n128=FLASHSERVE_PREFILL_WS_BLOCK_N=128 n176=FLASHSERVE_PREFILL_WS_BLOCK_N=176
# The two harnesses' page ratios (call 4): ab's paged and packed 4x4k rows interleaved pass by pass.
timeout 120 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 8 --interleave \
  --only d128-4x4k-c-p16,d128-4x4k-c,d128-4x4k-p16,d128-4x4k > "$out/ab_interleaved.log" 2>&1
echo "$(el) ab interleaved rc $?"; grep -v again "$out/ab_interleaved.log"
timeout 60 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 128 --paged-only --rounds 5 \
  > "$out/bench_paged.log" 2>&1
echo "$(el) bench paged rc $?"; tail -n 4 "$out/bench_paged.log"
suite $B/test_prefill_cuda 70 test_prefill_cuda 'Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches:PrefillCuda.BigPages'
pack_out
