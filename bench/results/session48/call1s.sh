#!/usr/bin/env bash
# Session 48 call 1 cut to ~250 s (the device time left after refused starts), carry build-s47x
# (session47/prep1.sh), run as `tar xJf build-s47x/b.tar.xz && DL=SECONDS bash THIS`: efia's grid
# (the item ahead's hand-over is new synchronization), ef / ia / efia against the tree on six rows
# (5 passes; predictions as call1.sh's), then, time left, the trace of d 64's and d 256's 1x16k
# rows and the tree's grid.
set -uo pipefail
B=build-s47
GO_SPAN=250
source bench/results/call_prologue.sh
source bench/results/session47/boundary.sh
suite $B/efia/test_prefill_cuda 50 test_prefill_efia 'Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches:PrefillCuda.FullyMaskedRowsAndLongSequences'
boundary 5 d128-16x1k,d128-16x1k-c,d64-16x1k,d64-16x1k-c,d128-4x4k-c,d128-1x16k
go 180 && timeout 45 python3 bench/trace_prefill.py --lib $B/trace/libflashserve_c.so --dump "$out/npz" \
  --only d64-1x16k,d64-1x16k-c,d256-1x16k,d256-1x16k-c > "$out/trace.log" 2>&1
echo "$(el) trace rc $?"; grep -v again "$out/trace.log" | head -40
go 215 && suite $B/test_prefill_cuda 30 test_prefill_cuda 'Gpu/PrefillCudaGrid.*'
pack_out
