#!/usr/bin/env bash
# Session 39's third call (issue 22). build-s39c/: the library to land, prefill v4.28 (v4.27 and
# d 64's second tile, 128 query rows, for causal calls of short sequences (ws_alt_tile), and the
# ws kernel the packed default at d 64 16x1k; the 128-row objects are call 2's m128 variant's SASS,
# md5, every other ws object v4.27's) with its test_prefill_cuda (the grid now runs d 64 at both
# row tiles) and test_fp8_cuda; base/: v4.27 (02d23fe). Predictions (before the run): d 64
# 16x1k causal +3% (v3 252 -> 260), 16x1k non-causal +5%, 4x4k causal +4%, skew causal +9%, 4x4k
# causal in 16-token pages +5%, the other d 64 rows level; paged d 64 16x1k: ws (192 or 128 rows)
# against v3 unmeasured, a guess of ws ahead by 0-10%.
B=build-s39c
source bench/results/call_prologue.sh
for t in test_prefill_cuda test_fp8_cuda; do suite $B/$t; done
D64=d64-16x1k,d64-16x1k-c,d64-4x4k,d64-4x4k-c,d64-1x16k,d64-1x16k-c,d64-skew-c,d64-4x4k-c-p16,d64-16x1k-c-p16,d64-16x1k-p16
timeout 150 python3 bench/ab_prefill.py --lib $B/base/libflashserve_c.so --passes 6 --only $D64 \
  --config v428=@$B/libflashserve_c.so --config v3=@$B/libflashserve_c.so,FLASHSERVE_PREFILL_KERNEL=wgmma \
  --config ws192=@$B/libflashserve_c.so,FLASHSERVE_PREFILL_KERNEL=ws,FLASHSERVE_PREFILL_WS_BLOCK_M=192 \
  --config ws128=@$B/libflashserve_c.so,FLASHSERVE_PREFILL_KERNEL=ws,FLASHSERVE_PREFILL_WS_BLOCK_M=128 > "$out/ab_d64.log" 2>&1
echo "$(el) ab d64 rc $?"; cat "$out/ab_d64.log"
G=Gpu/PrefillCudaGrid.MatchesReferenceAndCpu
ws_sanitize $B/test_prefill_cuda "$G/9:$G/10:PrefillCuda.MaskOptions" "$G/9:$G/10" 9 10
pack_out
