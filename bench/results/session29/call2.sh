#!/usr/bin/env bash
# Session 29 call 2 (issue 27; not run: the session's GPU time ran out): session 28's call8 found
# test_sampler_cuda 0/4 and test_model_cuda 11/18 on the H100, an illegal address (sticky) at the
# first sampled (temperature > 0) launch; the greedy-only tests passed. The sampler kernel has
# since gone back to one CTA an SM (the bound it last passed under, cd7ecf9); the build that
# faulted (two CTAs an SM) is in build-gpu/ab/lb2. Both whole, then memcheck on the first sampler
# test of whichever fails (the kernel and line: -lineinfo), then the model's failing tests one a
# process.
# Carry build-gpu/tests/test_sampler_cuda, build-gpu/tests/test_model_cuda, build-gpu/ab/lb2.
source bench/results/call_prologue.sh
S=SamplerCuda.TwoLaunchesOutstandingFinishInOrder
for b in $B/tests $B/ab/lb2; do
  n=$(basename $b)
  for t in test_sampler_cuda test_model_cuda; do
    timeout 90 $b/$t > "$out/${n}_$t.log" 2>&1
    echo "$(el) $n $t rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/${n}_$t.log" | tr '\n' ' ')"
    grep -E "^\[  FAILED  \]|Failure$" "$out/${n}_$t.log" | head -4
  done
  if grep -q "FAILED" "$out/${n}_test_sampler_cuda.log"; then
    timeout 90 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --show-backtrace device $b/test_sampler_cuda \
      --gtest_filter=$S > "$out/${n}_san_sampler.log" 2>&1
    echo "$(el) $n memcheck rc $?"; grep -m1 -B2 -A14 "Invalid\|ERROR" "$out/${n}_san_sampler.log" | head -24
    for t in SameDistributionsAsTheHost LargeVocabularyBothPathsFollowTheRules LogprobsOnTheDeviceMatchTheHost; do
      timeout 30 $b/test_sampler_cuda --gtest_filter=SamplerCuda.$t > "$out/${n}_s_$t.log" 2>&1
      echo "$(el) $n $t alone rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/${n}_s_$t.log" | head -1)"
    done
  fi
done
