#!/usr/bin/env bash
# Session 28 call 8 (issues 27, 25; the loans came back late in the session): the GPU tests of
# every change sessions 27 and 28 turned on without a GPU, first (test_model_cuda,
# test_sampler_cuda, test_skinny_gemm_cuda, test_fp8_cuda), then the decode step
# (bench_model --quick --steps-only) and mixed-step graphs (bench_model --mixed), then the
# issue's server one step at a time against --overlap-steps at concurrency 1 and 64 (1k / 128).
# Carry build-gpu/pack, build-gpu/tests/{test_model_cuda,test_sampler_cuda,test_skinny_gemm_cuda,
# test_fp8_cuda}, build-gpu/bench/bench_model.
P=build-gpu/pack
LIBS="$PWD/$P/lib"; source bench/results/call_prologue.sh
for t in test_model_cuda test_sampler_cuda test_skinny_gemm_cuda test_fp8_cuda; do
  timeout 120 $B/tests/$t > "$out/$t.log" 2>&1
  echo "$(el) $t rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/$t.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED  \]|Failure$" "$out/$t.log" | head -6
done
grep -hE -A4 "Failure$" "$out"/test_*.log | head -30
timeout 80 $B/bench/bench_model --quick --steps-only > "$out/steps.log" 2>&1; echo "$(el) steps rc $?"
grep -A5 "^batch" "$out/steps.log" | head -6
timeout 80 $B/bench/bench_model --quick --mixed > "$out/mixed.log" 2>&1; echo "$(el) mixed rc $?"; tail -6 "$out/mixed.log"
left=$(( ${LIMIT:-585} - ($(date +%s) - t0) ))
if [ $left -gt 120 ]; then
  # The 32768 blocks (64 GiB) fit the H200; on an 80 GB card the pool is sized from memory.
  mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
  blocks=",--num-blocks,32768"; [ "${mem:-0}" -lt 100000 ] && blocks=""
  srv=$P/server/flashserve_server$blocks,--max-num-seqs,256,--max-batched-tokens,8192
  OUT=/tmp/serve IN=1024 OUTLEN=128 N1=16 N64=128 CONCURRENCY="1 64" timeout $left bash scripts/gpu_serve_check.sh \
    $P/client/flashserve_bench one=$srv overlap=$srv,--overlap-steps 2>&1 | tee "$out/serve.log" | tail -14
  cp /tmp/serve/*.json "$out/" 2>/dev/null
fi
echo "$(el) done"
