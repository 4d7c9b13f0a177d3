#!/usr/bin/env bash
# Session 53 call 1 (issue 22), carry build-s53y (prep1.sh), .whl/fa3 and .whl/fi; run as
# `tar xJf build-s53y/b.tar.xz && bash bench/results/session53/call1.sh` (~8 min):
# 1. test_prefill_cuda whole on the tree's build (ba2cf7e's mend moved the varlen map flag's test
#    into ragged_q: no GPU test had run on it);
# 2. session52/next_call.sh's captured calls (GRAPH=1: the tree's rule, one CTA an item, the static
#    persistent walk everywhere; 6 passes paired against the eager default);
# 3. v4.37 beside cuDNN, FA3 and FlashInfer 0.7.2 at d 128 and d 64 (the last full table with
#    FlashInfer was v4.34's, session 46).
B=${B:-build-s53}
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
echo "$(el) peers installed"
set +e
suite $B/test_prefill_cuda 200 test_prefill_cuda
go 230 && { ab graph 6 27,24,26,34,25,28,18,1 graph=GRAPH=1 graph_np=GRAPH=1,FLASHSERVE_PREFILL_WS_PERSISTENT=0 \
  graph_sp=GRAPH=1,FLASHSERVE_PREFILL_WS_PERSISTENT=1 > /dev/null
  python3 bench/ab_paired.py "$out/ab_graph.log" 2>&1 | tail -10; }
timeout $(( 580 - $(date +%s) + t0 )) python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 128,64 \
  --no-extra --flashinfer --rounds 3 --json "$out/peers_128_64.jsonl" > "$out/bench_prefill_peers_128_64.log" 2>&1
echo "$(el) bench rc $?"; tail -n 16 "$out/bench_prefill_peers_128_64.log"
pack_out
