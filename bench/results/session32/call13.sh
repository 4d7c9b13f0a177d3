#!/usr/bin/env bash
# Session 32 (issue 25): FP8 decode at (1,32k) streams 8.6 GB/s a CTA against bf16's 11 and
# (64,8k) FP8's 11.3 (fp8_splits.py: the planner's 33 splits are the best even count; the split
# kernel 30.4 us of the 31.2). The split kernel's anatomy by trace stamps (a build with
# -DFLASHSERVE_DECODE_EXPERIMENTS=ON -DFLASHSERVE_DECODE_TRACE=ON, build-dtrace/), bf16 and e4m3
# pages of the same keys: start, issue, ramp, loop, epilogue a CTA. Carry build-dtrace/libflashserve_c.so.
B=build-dtrace
source bench/results/call_prologue.sh
timeout 150 python3 bench/trace_decode.py --lib $B/libflashserve_c.so --shape 1,32768 --shape 64,8192 \
  --shape 1,4096 --fp8 e4m3 --dump $out/dump 2>&1 | tee $out/trace.log | grep -v Warn
tar czf $out/dump.tgz -C $out dump && rm -rf $out/dump
