#!/usr/bin/env bash
# Session 39's first call (issue 22), written in session 38: build-s39/ from next_prep.sh (~45 MB).
# The general tile loop without the transform's code (session 38's SASS: d 64 kernel 8928 ->
# 5112 instructions, local loads 107 -> 59; d 128 tile loop 2603 -> 807 with the mask by
# selects on every tile; with the plain run at d 128, plain 517 and masked ~800).
# Predictions (session 38, before any run):
#  - nt64, ws forced: d 64 16x1k causal 186 -> 230-260 TFLOP/s (most of a short causal item's
#    tiles are general), 4x4k causal +5-10%, 1x16k causal +1-3%, non-causal +0-3%; if 16x1k
#    causal passes v3 (249), the d 64 default moves to ws there too;
#  - nt128: the masked loop's selects on every tile: long non-causal rows -3..+2%, the short
#    causal rows +2-5%;
#  - nt128p: +2-5% on the short causal rows, level to +2% on the long ones.
B=build-s39
source bench/results/call_prologue.sh
for v in nt64 nt128 nt128p; do
  prefill_grid $B/$v/test_prefill_cuda
  mv "$out/test_prefill.log" "$out/test_prefill_$v.log"
done
timeout 150 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 6 \
  --only d64-16x1k,d64-16x1k-c,d64-4x4k,d64-4x4k-c,d64-1x16k,d64-1x16k-c,d64-skew-c,d64-4x4k-c-p16 \
  --config ws=FLASHSERVE_PREFILL_KERNEL=ws --config nt64=@$B/nt64/libflashserve_c.so,FLASHSERVE_PREFILL_KERNEL=ws \
  > "$out/ab_d64.log" 2>&1
echo "$(el) ab d64 rc $?"; cat "$out/ab_d64.log"
timeout 200 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 6 \
  --only d128-16x1k,d128-16x1k-c,d128-4x4k-c,d128-8x2k-c,d128-skew-c,d128-4x4k,d128-1x16k,d128-1x16k-c,d128-4x4k-c-p16,d128-1x2k+30k-c-p16-e4m3,d128-1x2k+30k-c-p16-e5m2 \
  --config nt128=@$B/nt128/libflashserve_c.so --config nt128p=@$B/nt128p/libflashserve_c.so > "$out/ab_d128.log" 2>&1
echo "$(el) ab d128 rc $?"; cat "$out/ab_d128.log"
for v in trace64 trace_nt64; do  # ws forced (d 64 16x1k takes v3 by default: its default row has no trace)
  timeout 60 python3 bench/trace_prefill.py --lib $B/$v/libflashserve_c.so --only d64-16x1k,d64-16x1k-c,d64-4x4k-c \
    --config ws=FLASHSERVE_PREFILL_KERNEL=ws > "$out/$v.log" 2>&1
  echo "$(el) $v rc $?"; head -8 "$out/$v.log"
done
pack_out
