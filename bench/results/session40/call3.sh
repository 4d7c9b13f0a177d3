#!/usr/bin/env bash
# Session 40's third call (issue 22), carry build-s40b (prep3.sh): v4.29's library (d 128's packed
# 128-key instances with three stages) with its test_prefill_cuda and test_fp8_cuda; st64_3 /
# st64_4 (d 64's ring three / four stages deep at both row tiles, packed and pages, bf16:
# FLASHSERVE_PREFILL_WS_STAGES_64) against v4.29, 8 passes; then the per-instruction stall samples
# (bench/ncu_source.sh) of d 128 1x16k causal at the 176-key tile, packed and in 16-token pages
# (where pages lose: session 39 and call 2's counters), and of d 64 16x1k causal and non-causal.
# Predictions (before the run): st64_3 +2-6% on d 64's rows (a d 64 tile is half d 128's bytes
# and compute, so two stages hide less of a load's latency; d 128 gained +1-4.7% from a third
# stage), st64_4 level with st64_3.
B=build-s40b
source bench/results/call_prologue.sh
for t in test_prefill_cuda test_fp8_cuda; do suite $B/$t; done
D64=d64-16x1k,d64-16x1k-c,d64-4x4k,d64-4x4k-c,d64-1x16k,d64-1x16k-c,d64-skew-c,d64-4x4k-c-p16,d64-16x1k-p16
timeout 150 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 8 --only $D64 \
  --config st64_3=@$B/st64_3/libflashserve_c.so --config st64_4=@$B/st64_4/libflashserve_c.so > "$out/ab_st64.log" 2>&1
echo "$(el) ab st64 rc $?"; cat "$out/ab_st64.log"
src() {  # name "profile_prefill args" [VAR=VAL ...]
  local name=$1 shape=$2
  shift 2
  LIB=$B/libflashserve_c.so bash bench/ncu_source.sh "$out" "$name" "$shape" "$@" > "$out/top_$name.txt" 2>&1
  echo "$(el) src $name rc $?"
  xz -9 "$out/src_$name.csv"
}
src packed176 "--batch 1 --len 16384 --causal" FLASHSERVE_PREFILL_WS_BLOCK_N=176
src pages176 "--batch 1 --len 16384 --causal --paged 16" FLASHSERVE_PREFILL_WS_BLOCK_N=176
src d64c "--batch 16 --len 1024 --dim 64 --causal"
src d64 "--batch 16 --len 1024 --dim 64"
pack_out
