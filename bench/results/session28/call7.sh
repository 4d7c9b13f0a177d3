#!/usr/bin/env bash
# Session 28 call 7 (issue 27), after session 27's call 5: overlapped steps (--overlap-steps, off
# by default until this runs) against steps one at a time, on the server
# (--num-blocks 32768 --max-num-seqs 256 --max-batched-tokens 8192), 1k prompts, 128 out, at
# concurrency 1 and 64; the phase table's device idle / prepare / run say where the host's share
# went. First the overlapped steps' GPU tests (test_model_cuda's StepsBegunBackToBack* and
# EngineWithOverlappedSteps, test_sampler_cuda's TwoLaunchesOutstanding*). Prediction in
# bench/NOTES.md ("Overlapped steps"). Carry build-gpu/pack, build-gpu/tests/test_model_cuda,
# build-gpu/tests/test_sampler_cuda.
P=build-gpu/pack
LIBS="$PWD/$P/lib"; source bench/results/call_prologue.sh
timeout 60 $B/tests/test_model_cuda --gtest_filter='*BackToBack*:*OverlappedSteps*:*MixedStepGraphs*' > "$out/test_overlap.log" 2>&1
echo "$(el) overlap tests rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_overlap.log" | tr '\n' ' ')"
timeout 60 $B/tests/test_sampler_cuda --gtest_filter='*TwoLaunches*' > "$out/test_sampler2.log" 2>&1
echo "$(el) sampler slots rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_sampler2.log" | tr '\n' ' ')"
grep -E "Failure|Expected|Which is" "$out/test_overlap.log" "$out/test_sampler2.log" | head -8
timeout 90 $B/bench/bench_model --mixed > "$out/mixed.log" 2>&1; echo "$(el) mixed rc $?"; tail -6 "$out/mixed.log"
srv=$P/server/flashserve_server,--num-blocks,32768,--max-num-seqs,256,--max-batched-tokens,8192
OUT=/tmp/serve IN=1024 OUTLEN=128 N1=16 N64=128 CONCURRENCY="1 64" timeout 420 bash scripts/gpu_serve_check.sh \
  $P/client/flashserve_bench one=$srv overlap=$srv,--overlap-steps 2>&1 | tee "$out/serve.log" | tail -14
cp /tmp/serve/*.json /tmp/serve/*.metrics "$out/" 2>/dev/null
echo "$(el) done"
