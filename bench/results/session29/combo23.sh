#!/usr/bin/env bash
# Calls 2 and 3 in one machine start (starts are what the budget runs out on): the sampler's
# fault first (issue 27), then issue 25's e5m2 and third diagnosis. Each script keeps its own
# time: call 2 ~2-4 min, call 3 the rest (its steps are capped by their own timeouts). Their logs
# come back as one archive (a call returns at most 8 files).
# Carry build-gpu/tests/{test_sampler_cuda,test_model_cuda,test_fp8_cuda,test_decode_cuda},
# build-gpu/ab/lb2, build-gpu/libflashserve_c.so (40 MiB).
dest=${OUT:-/tmp/o}
mkdir -p "$dest"
OUT=/tmp/logs/c2 bash bench/results/session29/call2.sh
OUT=/tmp/logs/c3 bash bench/results/session29/call3.sh
tar czf "$dest/logs.tgz" -C /tmp/logs c2 c3
