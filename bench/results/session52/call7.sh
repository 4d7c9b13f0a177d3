#!/usr/bin/env bash
# Session 52 call 7 (issue 22), carry build-s52y (prep7.sh); run as
# `tar xJf build-s52y/b.tar.xz && bash bench/results/session52/call7.sh` (~120 s):
# test_prefill_cuda whole on the tree's build: PrefillCuda.CapturedCalls (new: calls captured into
# a graph, ragged packed batches now on the static persistent walk, against the reference and
# byte for byte against the eager call), the grid, the skewed batches.
B=build-s52
source bench/results/call_prologue.sh
set +e
suite $B/test_prefill_cuda 200 test_prefill_cuda
pack_out
