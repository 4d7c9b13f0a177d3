#!/usr/bin/env bash
# The table beside the peers in one call (issue 22's targets are an H200's; none has come since
# session 46): session53/call1.sh's and call2.sh's bench_prefill runs without their tests and
# captured calls, ~8 min. Carry a build (default build-s54z from prep4.sh, whose prefill SASS is
# v4.39's; or B=build-s53c with build-s53w), .whl/fa3 and .whl/fi; run as
# `bash bench/results/session54/table.sh`.
B=${B:-build-s54z}
[ -d "$B" ] || { [ -f build-s54p/b.tar.xz ] && tar xJf build-s54p/b.tar.xz; }
[ -d "$B" ] || { [ -f build-s53w/b.tar.xz ] && tar xJf build-s53w/b.tar.xz; }
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
echo "$(el) peers installed"
set +e
timeout $(( 330 - $(date +%s) + t0 )) python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 128,64 \
  --no-extra --flashinfer --rounds 3 --json "$out/peers_128_64.jsonl" > "$out/bench_prefill_peers_128_64.log" 2>&1
echo "$(el) bench 128,64 rc $?"; tail -n 16 "$out/bench_prefill_peers_128_64.log"
timeout $(( 585 - $(date +%s) + t0 )) python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 256 \
  --flashinfer --rounds 3 --json "$out/peers_256_extra.jsonl" > "$out/bench_prefill_peers_256_extra.log" 2>&1
echo "$(el) bench 256 + extra rows rc $?"; tail -n 12 "$out/bench_prefill_peers_256_extra.log"
pack_out
