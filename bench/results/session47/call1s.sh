#!/usr/bin/env bash
# Session 47, call 1 cut to the device time left (~430 s with the start), carry build-s47x (prep1.sh),
# run as `tar xJf build-s47x/b.tar.xz && bash bench/results/session47/call1s.sh`: the tree's grid
# (v4.35's rebuilt test, not yet run on a GPU), the key tile rule against v4.34's launch (6
# passes), efia's grid, then ef / ia / efia against the tree on six rows (5 passes). Predictions
# as call1.sh's.
set -uo pipefail
B=build-s47
source bench/results/call_prologue.sh
source bench/results/session47/boundary.sh
suite $B/test_prefill_cuda 70 test_prefill_cuda 'Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches:PrefillCuda.BigPages'
ab rule 6 d128-4x4k,d128-8x2k,d128-skew,d128-1x16k,d128-4x4k-p16 v434=FLASHSERVE_PREFILL_WS_BLOCK_N=176
suite $B/efia/test_prefill_cuda 60 test_prefill_efia 'Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches:PrefillCuda.FullyMaskedRowsAndLongSequences'
ROWS=d128-16x1k,d128-16x1k-c,d64-16x1k,d64-16x1k-c,d128-4x4k-c,d128-1x16k
boundary 5 $ROWS
pack_out
