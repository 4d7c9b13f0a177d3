#!/usr/bin/env bash
# Session 39's first call (issue 22): session 38's next_call1.sh with its nt64 variant replaced by
# the landing candidate, tf (prefill v4.27: d 64's ws instances in two forms, without the logit
# transform's code for calls without one, with it for calls with one; prefill_ws_split_logits).
# tf's d 64 no-transform objects are nt64's SASS (md5) and every other ws object main's (md5), so
# tf's library stands for nt64 in the A/B. build-s39/: main's library (ad89890), tf (library and
# test_prefill_cuda), nt128, nt128p (each with its test_prefill_cuda), trace64, trace_nt64.
# Predictions (session 38, before any run): as next_call1.sh's header: d 64 16x1k causal by ws
# 186 -> 230-260 TFLOP/s, 4x4k causal +5-10%, 1x16k causal +1-3%, non-causal +0-3%; nt128 long
# non-causal -3..+2%, short causal +2-5%; nt128p short causal +2-5%, long level..+2%.
B=build-s39
source bench/results/call_prologue.sh
suite $B/tf/test_prefill_cuda 170 test_prefill_tf
for v in nt128 nt128p; do prefill_grid $B/$v/test_prefill_cuda $v; done
timeout 150 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 6 \
  --only d64-16x1k,d64-16x1k-c,d64-4x4k,d64-4x4k-c,d64-1x16k,d64-1x16k-c,d64-skew-c,d64-4x4k-c-p16 \
  --config ws=FLASHSERVE_PREFILL_KERNEL=ws --config tf=@$B/tf/libflashserve_c.so,FLASHSERVE_PREFILL_KERNEL=ws \
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
