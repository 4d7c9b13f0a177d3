#!/usr/bin/env bash
# Session 42 call 1 (issue 22), carry build-s42b (prep1.sh): grp (FLASHSERVE_PREFILL_WS_GROUPED=1 in
# d 128's paged 16-bit instances: grouped K/V stages; with FLASHSERVE_PREFILL_WS_PAGE_TMA=1 each
# 16-token chunk of a page one 4 KB TMA box, else the row gather into the grouped layout).
# Its test_prefill_cuda whole with PAGE_TMA=1, the grid and skewed batches with the grouped
# gather, then ab 6 passes over d 128's paged rows (packed controls) against v4.32: gather (grp,
# the row gather) and tma (grp, page boxes); then the key tile forced on paged rows (v4.32).
# Prediction (before the run): tma d 128 pages +8-15% (to 0.95 of packed: 4 KB boxes at the
# packed boxes' rate, ~2100 cycles a 128-key tile of the TMA unit like packed's, and the gather's
# ~3000 warp instructions a tile off the SM), the grouped gather level (same instructions).
B=build-s42b
source bench/results/call_prologue.sh
FLASHSERVE_PREFILL_WS_PAGE_TMA=1 suite $B/grp/test_prefill_cuda 200 test_prefill_grp_tma
prefill_grid $B/grp/test_prefill_cuda grp_gather
ROWS=d128-4x4k-c-p16,d128-4x4k-p16,d128-1x16k-c-p16,d128-1x2k+30k-c-p16,d128-1x2k+30k-c-p64,d128-4x4k-c-p64
ROWS=$ROWS,d128-skew-c-p16,d128-mix-c-p16,d128-4x4k-c,d128-1x16k-c
ab grp 6 $ROWS gather=@$B/grp/libflashserve_c.so tma=@$B/grp/libflashserve_c.so,FLASHSERVE_PREFILL_WS_PAGE_TMA=1
grep -c "do not encode" "$out/ab_grp.log"
