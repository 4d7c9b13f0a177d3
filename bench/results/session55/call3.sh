#!/usr/bin/env bash
# Session 55 call 3 (issue 22), carry build-s55t (prep3.sh), ~3 min: why the skewed batch in
# 16-token pages loses -34% under capture where packed loses -12% (session 54 call 1). The
# static walk without counters (SCHED=static, PERSISTENT=1: a capture's walk, eager so that the
# trace can synchronize) against the dynamic walk, traced (bench/trace_prefill.py: span, busy =
# the SMs' share of the span with a CTA alive, tail = last exit - median exit, tile = the main
# loop's pace a tile, item overheads). Two guesses apart: the balance (busy down, tail up, the
# same pace a tile) or the CTAs drifting apart over the order so that their K/V spread past the
# L2 (the pace a tile up, paged more than packed). Rows: d 128 skew causal packed and in 16-token
# pages, the mix in 16-token pages, d 128 16x1k causal. tree: v4.39's round robin; zz: the
# candidate's zigzag (and its ZIGZAG=0 control, the round robin in the same library).
B=${B:-build-s55r}
[ -d "$B" ] || tar xJf build-s55t/b.tar.xz
source bench/results/call_prologue.sh
set +e
ST=FLASHSERVE_PREFILL_WS_SCHED=static,FLASHSERVE_PREFILL_WS_PERSISTENT=1
timeout 100 python3 bench/trace_prefill.py --lib $B/tree/libflashserve_c.so --only 24,25,28,1 --config st=$ST \
  --dump "$out/npz_tree" > "$out/trace_tree.log" 2>&1
echo "$(el) trace tree rc $?"; head -12 "$out/trace_tree.log"
timeout 100 python3 bench/trace_prefill.py --lib $B/zz/libflashserve_c.so --only 24,25,28,1 --config zig=$ST \
  --config rr=$ST,FLASHSERVE_PREFILL_WS_ZIGZAG=0 --dump "$out/npz_zz" > "$out/trace_zz.log" 2>&1
echo "$(el) trace zz rc $?"; head -16 "$out/trace_zz.log"
pack_out
