#!/usr/bin/env bash
# Session 40's eighth call (issue 22), carry build-s40e: v4.30 (its packed kernels' SASS with the
# switch off is main's, md5) against box16 (FLASHSERVE_PREFILL_WS_KV_BOX_ROWS=16: packed K/V loaded
# as TMA boxes of 16 rows, 8 or 11 a tile's column block instead of one, the d 64 / d 128 bf16
# no-transform packed instances and prefill_cuda.cu's maps), 8 passes; the paged rows beside as
# this run's pages-to-packed reference. The question: do TMA boxes the size of a 16-token page's
# rows cost the TMA unit or the producer anything (a lean page-box producer would issue ~5x fewer
# instructions than the row gather), or do they lose as session 13's page boxes did (1.53 ms
# against packed's 0.91 at 2k over 30k)? Prediction (before the run): box16 level with packed
# (-2..0%): a box's issue is one instruction of one thread, and 11 boxes a 2.8k-cycle tile leave
# the TMA unit ~250 cycles a box.
B=build-s40e
source bench/results/call_prologue.sh
ROWS=d128-4x4k,d128-4x4k-c,d128-1x16k-c,d128-16x1k,d128-1x2k+30k-c,d64-4x4k,d64-1x16k,d128-1x2k+30k-c-p16,d128-1x16k-c-p16
timeout 200 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 8 --only $ROWS \
  --config box16=@$B/box16/libflashserve_c.so > "$out/ab_box16.log" 2>&1
echo "$(el) ab box16 rc $?"; grep -v again "$out/ab_box16.log"
