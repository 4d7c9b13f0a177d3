#!/usr/bin/env bash
# Session 47, the item boundary alone in ~150 s (the device time left), carry build-s47x
# (prep1.sh), run as `tar xJf build-s47x/b.tar.xz && bash bench/results/session47/call1t.sh`:
# efia's grid (the new hand-over's synchronization), then ef / ia / efia against the tree on
# d 128's and d 64's 16x1k rows, causal and not (4 passes). Predictions as call1.sh's.
set -uo pipefail
B=build-s47
source bench/results/call_prologue.sh
source bench/results/session47/boundary.sh
suite $B/efia/test_prefill_cuda 50 test_prefill_efia 'Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches'
ROWS=d128-16x1k,d128-16x1k-c,d64-16x1k,d64-16x1k-c
boundary 4 $ROWS
pack_out
