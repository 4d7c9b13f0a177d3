#!/usr/bin/env bash
# Session 39's last call: the library as it lands (v4.28 after the review's mends: routing and
# comments, kernels md5-equal to calls 1-3's) with its test_prefill_cuda whole (MaskOptions now
# in fp16 too: the fp16 _transform instances' first run).
B=build-s39g
source bench/results/call_prologue.sh
suite $B/test_prefill_cuda
