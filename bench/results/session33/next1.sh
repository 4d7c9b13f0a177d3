#!/usr/bin/env bash
# Next session's first call (run bench/results/session33/prep_next1.sh here first; carry
# build-call/). Nothing in it has run on a GPU.
#  1. Issue 25, FP8 producer v5 (fp8_regpath.patch: the codes loaded into registers chunk by
#     chunk as the last tile's chunks are converted, no code slots; the producer's shared bytes a
#     code 4 -> 2) at 88 / 96 registers (consumers 208 / 200): each variant's test_fp8_cuda; ab
#     rows 11 (bf16 pages, for the ratio) and 29-31, 5 passes. Prediction: +5-15% on the FP8
#     rows (0.77 of bf16 pages -> 0.82-0.88), less if the loads' latency shows.
#  2. Issue 22, prefill v4.24 (v424_ring.patch: the ping-pong ring runs on across items, so the
#     first warpgroup's next S(0) goes under the last one's epilogue): the ring variant's
#     grid and skewed batches; ab against main on the d 128 / d 64 rows, 4 passes. Prediction:
#     +2-5% where items are short (16x1k, causal, skewed), level on 1x16k; the 176-key and FP8
#     instances' tile loops grew in the SASS (3481 -> 3711, 2612 -> 2771: descriptor math left
#     the uniform datapath), so those rows may lose: ring2 keeps main's ring there.
#  3. Main's test_prefill_cuda whole (PoolsBeyondTheRowGathersReach: a 64 GiB pool view takes v3).
#  4. The d 128 key tile: FLASHSERVE_PREFILL_WS_BLOCK_N=128 against the default (176 there) on
#     rows 2, 4, 20, 26, 5 passes (calls 4 and 6 of session 33 disagreed within their spreads).
B=build-call
source bench/results/call_prologue.sh
for v in fp8reg88 fp8reg96; do
  timeout 120 $B/$v/test_fp8_cuda --gtest_brief=1 > "$out/test_fp8_$v.log" 2>&1
  echo "$(el) $v test_fp8_cuda rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_fp8_$v.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED" "$out/test_fp8_$v.log" | head -4
done
timeout 120 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 --only 11,29,30,31 \
  --config reg88=@$B/fp8reg88/libflashserve_c.so --config reg96=@$B/fp8reg96/libflashserve_c.so > "$out/ab_fp8reg.log" 2>&1
echo "$(el) ab fp8 rc $?"; grep -v again "$out/ab_fp8reg.log"
prefill_grid $B/ring/test_prefill_cuda
timeout 200 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 4 \
  --only 0,1,2,3,4,5,6,8,11,12,13,14,15,16,17,19,20,21,22,23,24,25,26,27,28,29 \
  --config ring=@$B/ring/libflashserve_c.so --config ring2=@$B/ring2/libflashserve_c.so > "$out/ab_ring.log" 2>&1
echo "$(el) ab ring rc $?"
timeout 150 $B/tests/test_prefill_cuda --gtest_brief=1 > "$out/test_prefill_main.log" 2>&1
echo "$(el) main test_prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_prefill_main.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" "$out/test_prefill_main.log" | head -4
timeout 80 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 --only 2,4,20,26 \
  --config n128=FLASHSERVE_PREFILL_WS_BLOCK_N=128 > "$out/ab_keytile.log" 2>&1
echo "$(el) ab key tile rc $?"
pack_out
