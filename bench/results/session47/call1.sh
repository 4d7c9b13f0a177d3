#!/usr/bin/env bash
# Session 47 call 1 (issue 22), carry build-s46 (session46/prep5.sh: the tree at 13f4c50, v4.35)
# and build-trace/libflashserve_c.so (prep_trace.sh): session 46's call 5 (the key tile rule's own
# build against v4.34's launch, 176 keys forced; both tiles forced on 2x8k; ab's paged and packed
# 4x4k rows interleaved pass by pass beside bench_prefill's paged column; the grid, the skew,
# BigPages), session 46's call 6 (the work order's L2 budget on the causal rows that trail FA3),
# then call2.sh (the trace). Predictions in those scripts: the rule +2.1 / +3.2 / +1.0% on 4x4k /
# 8x2k / the skew, controls level; the L2 knobs level at d 64 and d 128, d 256 causal +-3%.
set -uo pipefail
OUT=${OUT:-/tmp/o}
OUT=$OUT/c5 bash bench/results/session46/call5.sh
OUT=$OUT/c6 bash bench/results/session46/call6.sh
OUT=$OUT/trace bash bench/results/session47/call2.sh
# one archive for all parts (a call returns at most 8 files)
tar czf /tmp/all.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/all.tgz "$OUT/out.tgz"
