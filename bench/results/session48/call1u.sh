#!/usr/bin/env bash
# Session 48, the item boundary in ~100 s (the last of the device time), carry build-s47x
# (session47/prep1.sh), run as `tar xJf build-s47x/b.tar.xz && bash THIS`: efia's grid, then ef /
# ia / efia against the tree on d 128 16x1k and d 64 16x1k causal (3 passes).
set -uo pipefail
B=build-s47
source bench/results/call_prologue.sh
source bench/results/session47/boundary.sh
suite $B/efia/test_prefill_cuda 40 test_prefill_efia 'Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches'
boundary 3 d128-16x1k,d64-16x1k-c
pack_out
