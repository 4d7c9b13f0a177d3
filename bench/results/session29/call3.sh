#!/usr/bin/env bash
# Session 29 call 3 (issue 25), written after call 1 (no GPU left): e5m2 codes converted by byte
# placement (exact, no F2FP; decode, the mma.sync prefill and the warp-specialized prefill), and
# whether F2FP or the shared-memory traffic sets the e4m3 producer's pace.
#  1. test_fp8_cuda, test_decode_cuda (the e5m2 instances against float64 and the CPU).
#  2. ab_prefill.py: e4m3 rows (29, 30) as they run, with FP8_DIAG=3 (e4m3 codes converted as
#     e5m2: the same loads and stores, no F2FP; wrong values) and 1 (no conversion); the e5m2 row
#     (31); bf16 pages beside (11, 6). If 3 reaches 1, F2FP is the cost; if it stays at the
#     default, the shared-memory traffic is.
#  3. bench_decode.py --fp8 e5m2 and e4m3 (ours; the peers only where their wheels are carried): e5m2 decode against its last reading.
# Carry build-gpu/libflashserve_c.so, build-gpu/tests/test_fp8_cuda, build-gpu/tests/test_decode_cuda.
source bench/results/call_prologue.sh
for t in test_fp8_cuda test_decode_cuda; do
  timeout 90 $B/tests/$t --gtest_brief=1 > "$out/$t.log" 2>&1
  echo "$(el) $t rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/$t.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED|Expected|Which is" "$out/$t.log" | head -6
done
# FP8 producer v4 (pipelined conversion, 40 registers) under racecheck and synccheck (session 29's
# call 1 ran its tests, not the sanitizers).
for tool in racecheck synccheck; do
  timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool $tool $B/tests/test_fp8_cuda \
    --gtest_filter='Fp8PrefillCuda.WsPipelineOverManyTiles' > "$out/san_$tool.log" 2>&1
  echo "$(el) $tool rc $? $(grep -E 'SUMMARY' "$out/san_$tool.log" | tail -1)"
done
timeout 120 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 2 --only 11,29,31,6,30 \
  --config nof2fp=FLASHSERVE_PREFILL_WS_FP8_DIAG=3 --config noconv=FLASHSERVE_PREFILL_WS_FP8_DIAG=1 \
  > "$out/ab_fp8_diag3.log" 2>&1
echo "$(el) ab rc $?"; cat "$out/ab_fp8_diag3.log"
for f in e5m2 e4m3; do
  timeout 150 python3 bench/bench_decode.py --lib $B/libflashserve_c.so --fp8 $f --no-flex \
    --only "(64,8k)" --only "(128,2k)" --only "(256,1k)" --only "(1,32k)" > "$out/bench_decode_$f.log" 2>&1
  echo "$(el) decode $f rc $?"; tail -n 8 "$out/bench_decode_$f.log"
done
