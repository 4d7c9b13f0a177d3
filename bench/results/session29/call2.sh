#!/usr/bin/env bash
# Session 29 call 2: call 1 of session 28's call8 found test_sampler_cuda and test_model_cuda
# failing (illegal address, sticky): each test in a process of its own, then memcheck on the
# first sampler test and the model tests that failed, for the faulting kernel.
# Carry build-gpu/tests/test_sampler_cuda, build-gpu/tests/test_model_cuda.
source bench/results/call_prologue.sh
timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --show-backtrace device $B/tests/test_sampler_cuda \
  --gtest_filter=SamplerCuda.TwoLaunchesOutstandingFinishInOrder > "$out/san_sampler.log" 2>&1
echo "$(el) memcheck sampler rc $?"; grep -m1 -B2 -A14 "Invalid\|ERROR" "$out/san_sampler.log" | head -30
for t in SamplerCuda.TwoLaunchesOutstandingFinishInOrder SamplerCuda.SameDistributionsAsTheHost \
         SamplerCuda.LargeVocabularyBothPathsFollowTheRules SamplerCuda.LogprobsOnTheDeviceMatchTheHost; do
  timeout 30 $B/tests/test_sampler_cuda --gtest_filter=$t > "$out/s_$t.log" 2>&1
  echo "$(el) $t rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/s_$t.log" | head -1)"
  grep -A3 "Failure" "$out/s_$t.log" | head -8
done
for t in LlamaCuda.StepDeviceTimes LlamaCuda.StepsBegunBackToBackEqualStepsOneAtATime LlamaCuda.MixedStepGraphsMatchEager \
         LlamaCuda.EngineWithOverlappedSteps 'HostAndDevice/LlamaCudaLogprobs.*'; do
  timeout 30 $B/tests/test_model_cuda --gtest_filter=$t > "$out/m_${t//\//_}.log" 2>&1
  echo "$(el) $t rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/m_${t//\//_}.log" | head -1)"
  grep -A3 "Failure" "$out/m_${t//\//_}.log" | head -8
done
timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --show-backtrace device $B/tests/test_model_cuda \
  --gtest_filter=LlamaCuda.StepsBegunBackToBackEqualStepsOneAtATime > "$out/san_model.log" 2>&1
echo "$(el) memcheck model rc $?"; grep -m1 -B2 -A14 "Invalid\|ERROR" "$out/san_model.log" | head -30
