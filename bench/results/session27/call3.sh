#!/usr/bin/env bash
# Session 27 call 3 (issue 25), written without a GPU: the FP8 warp-specialized prefill's
# producer v3 (two code slots a ring) checked and measured, then our FP8 decode beside both
# peers' (session 26's call5). Right after call 1 on the warm machine (the wheels unpacked,
# FlashInfer's JIT cache filled). Carry .whl, build-gpu/libflashserve_c.so,
# build-gpu/tests/test_fp8_cuda.
#  1. test_fp8_cuda (WsPipelineOverManyTiles and the rest); racecheck and synccheck on the
#     many-tile case (the slots' reuse without a barrier between the producer threads).
#  2. bench_prefill.py --chunked-only: 2k over 30k in 16-token pages, FP8 against bf16 pages
#     (session 26: 365 against 580, 0.63; prediction 0.78-0.9).
#  3. bench_decode.py --fp8 e4m3 with FA3's and FlashInfer's FP8 decode, the issue's rows.
source bench/results/call_prologue.sh
timeout 60 $B/tests/test_fp8_cuda > "$out/test_fp8.log" 2>&1
echo "$(el) fp8 rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_fp8.log" | tr '\n' ' ')"
grep -E "Failure|FAILED|Expected|Which is" "$out/test_fp8.log" | head -8
for tool in racecheck synccheck; do
  timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool $tool $B/tests/test_fp8_cuda \
    --gtest_filter='Fp8PrefillCuda.WsPipelineOverManyTiles' > "$out/san_$tool.log" 2>&1
  echo "$(el) $tool rc $? $(grep -E 'SUMMARY' "$out/san_$tool.log" | tail -1)"
done
timeout 60 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --chunked-only --rounds 3 \
  > "$out/bench_prefill_fp8.log" 2>&1
echo "$(el) chunked rc $?"; tail -n 6 "$out/bench_prefill_fp8.log"
source scripts/gpu_peers.sh install
left=$(( 580 - ($(date +%s) - t0) ))
timeout $left python3 bench/bench_decode.py --lib $B/libflashserve_c.so --fp8 e4m3 --no-flex \
  --only "(64,8k)" --only "(128,2k)" --only "(256,1k)" --only "(1,32k)" --json "$out/bench_decode_fp8.json" \
  > "$out/bench_decode_fp8.log" 2>&1
echo "$(el) bench_decode rc $?"; tail -n 12 "$out/bench_decode_fp8.log"
