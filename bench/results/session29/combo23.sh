#!/usr/bin/env bash
# Calls 2 and 3 in one machine start (starts are what the budget runs out on): the sampler's
# fault first (issue 27), then issue 25's e5m2 and third diagnosis. Each script keeps its own
# time: call 2 ~2-4 min, call 3 the rest (its steps are capped by their own timeouts). Their logs
# come back as one archive (a call returns at most 8 files).
# Carry build-gpu/tests/{test_sampler_cuda,test_model_cuda,test_fp8_cuda,test_decode_cuda,
# test_prefill_cuda}, build-gpu/ab/lb2, build-gpu/libflashserve_c.so (47 MiB).
dest=${OUT:-/tmp/o}
mkdir -p "$dest"
OUT=/tmp/logs/c2 bash bench/results/session29/call2.sh
OUT=/tmp/logs/c3 bash bench/results/session29/call3.sh
# The prefill grid's one-CTA runs (added after call 1): the whole GPU prefill test.
mkdir -p /tmp/logs/c3
timeout 140 build-gpu/tests/test_prefill_cuda --gtest_brief=1 > /tmp/logs/c3/test_prefill.log 2>&1
echo "prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/logs/c3/test_prefill.log | tr '\n' ' ')"
tar czf "$dest/logs.tgz" -C /tmp/logs c2 c3
