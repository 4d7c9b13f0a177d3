#!/usr/bin/env bash
# Issue 22's table on its own card, for a session that gets an H200 (the last peers table,
# session 33's call 6, ran on an H100): prefill v4.25 beside cuDNN, FA3 (tokenspeed-fa3) and
# FlashInfer 0.7.2 (fa3 backend, JIT-built there, 70-90 s a head dim), bench_prefill --quick
# --dims 128,256 --flashinfer, same process, L2 flushed, 3 rounds. Carry build-peers/ (main's
# library: mkdir -p build-peers && cp build-gpu/libflashserve_c.so build-peers/) and .whl
# (scripts/gpu_peers.sh prepare and prepare-flashinfer: 38 MB).
# DIMS (default 128,256) and EXTRA (e.g. --no-extra) pick the rows: a second call on the warm
# machine needs no .whl (the first call's install stays in /tmp), e.g. DIMS=64 EXTRA=--no-extra.
B=build-peers
DIMS=${DIMS:-128,256}
tag=$(tr , _ <<<"$DIMS")
EXTRA=${EXTRA:-}
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
set +e
timeout 540 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims "$DIMS" $EXTRA --flashinfer \
  --rounds 3 --json "$out/peers_$tag.jsonl" > "$out/bench_prefill_peers_$tag.log" 2>&1
echo "$(el) bench rc $?"; tail -n 22 "$out/bench_prefill_peers_$tag.log"
pack_out
