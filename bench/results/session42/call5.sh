#!/usr/bin/env bash
# Session 42 call 5 (issue 22), carry build-s42d (the tree's library) and .whl: synccheck over the skewed batches on the
# tree (v4.33: the varlen walk past the offsets' cache), then v4.33 beside cuDNN, FA3 and
# FlashInfer 0.7.2 (session 37's call_peers.sh with B=build-s42c): DIMS (default 128,64), no extra rows.
B=${B:-build-s42d}
DIMS=${DIMS:-128,64}
tag=$(tr , _ <<<"$DIMS")
source bench/results/call_prologue.sh
[ -f $B/test_prefill_cuda ] && SAN_KERNELS=prefill_sm90_ws sanitize synccheck 60 $B/test_prefill_cuda PrefillCuda.SkewedVarlenBatches synccheck
source scripts/gpu_peers.sh install
set +e
timeout 420 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims "$DIMS" --no-extra --flashinfer \
  --rounds 3 --json "$out/peers_$tag.jsonl" > "$out/bench_prefill_peers_$tag.log" 2>&1
echo "$(el) bench rc $?"; tail -n 20 "$out/bench_prefill_peers_$tag.log"
pack_out
