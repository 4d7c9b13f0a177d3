#!/usr/bin/env bash
# Session 48 call 1 (issue 22): session 47's call 1 reordered for a short device budget, the new
# work first. Carry build-s47x (session47/prep1.sh); run as
# `tar xJf build-s47x/b.tar.xz && DL=SECONDS bash bench/results/session48/call1.sh`. In order:
# 1. the tree's grid (v4.35's build) and efia's (the item ahead's hand-over is new
#    synchronization: a hang shows as the timeout);
# 2. the item boundary (bench/history/prefill.md "Session 47"): ef, ia, efia against the tree on
#    the short and causal rows. Prediction: ef +0.7-1.5%, ia +1.5-2.5% on 16x1k (causal more),
#    level on 1x16k;
# 3. session 46's call 5, the key tile rule's own build against v4.34's launch (176 keys forced):
#    4x4k +2.1%, 8x2k +3.2%, the skew +1.0%, controls level;
# 4. the trace of the rows that trail the peers (d 64 16x1k, d 64 / d 256 1x16k, causal and not,
#    d 64 4x4k causal), with the main loop split at the plain run's end (session 49's stamps: the
#    masked tiles' pace apart from the plain tiles');
# 4b. bulk_rate (session 49): K/V boxes multicast to a cluster of two against one CTA's own, and
#    one CTA's byte rate on fewer SMs (is ~31 bytes a cycle an SM the SM's limit or the L2's);
# 5. ab's paged and packed 4x4k rows interleaved pass by pass, bench_prefill's paged column beside;
# 5b. (session 49) the tree's build: python/tests/test_torch_gpu.py (FP8 KVCache on CUDA, the
#    host checks of CUDA calls' lengths) and test_kv_storage_cuda (copy_blocks on two streams);
# 6. the work order's L2 budget (d 256 causal +-3%, the rest level).
set -uo pipefail
B=build-s47
source bench/results/call_prologue.sh
source bench/results/session47/boundary.sh
suite $B/test_prefill_cuda 70 test_prefill_cuda 'Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches:PrefillCuda.BigPages'
suite $B/efia/test_prefill_cuda 70 test_prefill_efia 'Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches:PrefillCuda.FullyMaskedRowsAndLongSequences:PrefillCuda.MaskOptions:PrefillCuda.HeadDim256'
ROWS=d128-16x1k,d128-16x1k-c,d64-16x1k,d64-16x1k-c,d128-4x4k-c,d64-4x4k-c,d128-1x16k,d256-1x16k-c,d128-many-c,d128-skew-c
go 250 && boundary 6 $ROWS
go 360 && ab rule 6 d128-4x4k,d128-8x2k,d128-skew,d128-1x16k,d128-4x4k-p16 v434=FLASHSERVE_PREFILL_WS_BLOCK_N=176
if go 430; then
  timeout 40 $B/bulk_rate > "$out/bulk_rate.log" 2>&1
  echo "$(el) bulk_rate rc $?"; grep -E "^tma|^tma_mc" "$out/bulk_rate.log" | head -30
fi
go 440 && timeout 70 python3 bench/trace_prefill.py --lib $B/trace/libflashserve_c.so --dump "$out/npz" \
  --only d64-16x1k,d64-16x1k-c,d64-4x4k-c,d64-1x16k,d64-1x16k-c,d256-1x16k,d256-1x16k-c \
  > "$out/trace.log" 2>&1
echo "$(el) trace rc $?"; grep -v again "$out/trace.log" | head -60
go 490 && timeout 50 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 6 --interleave \
  --only d128-4x4k-c-p16,d128-4x4k-c,d128-4x4k-p16,d128-4x4k > "$out/ab_interleaved.log" 2>&1
echo "$(el) ab interleaved rc $?"; grep -v again "$out/ab_interleaved.log"
if go 515; then  # (session 49) the tree's build (tree/): the Python binding on the GPU (FP8 KVCache on
  # CUDA, the host checks of CUDA calls' lengths, new) and copy_blocks on two streams
  PYTHONPATH=python FLASHSERVE_LIB=$B/tree/libflashserve_c.so timeout 40 python3 python/tests/test_torch_gpu.py \
    > "$out/test_torch_gpu.log" 2>&1
  echo "$(el) test_torch_gpu rc $?"; tail -n 8 "$out/test_torch_gpu.log"
  suite $B/tree/test_kv_storage_cuda 30
fi
go 520 && ab l2knobs 3 d256-1x16k-c,d256-1x16k,d128-1x16k-c,d64-1x16k-c \
  mb16=FLASHSERVE_PREFILL_WS_L2_MB=16 mb48=FLASHSERVE_PREFILL_WS_L2_MB=48 \
  all=FLASHSERVE_PREFILL_WS_SECTION=0
pack_out
