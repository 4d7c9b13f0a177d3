#!/usr/bin/env bash
# Session 39's fifth call (issue 22: pages against packed). build-s39d/: the library to land
# (v4.28 with the paged default's routing; its kernels are calls 1-3's, md5) with its
# test_prefill_cuda; p40/ and p56/: the paged d 128 instances (128 and 176 keys, bf16 and fp16,
# without the transform) with the producer at 40 or 56 registers (FLASHSERVE_PREFILL_WS_PRODUCER_REGS;
# consumers 232 / 224), each with its test_prefill_cuda. At 24 the row gather spills: d 128 paged
# 49 local loads and 43 stores (producer loop 38 LDL, 28 STL a pass of 32 cp.async); p40 5 / 4,
# p56 0 / 0. Predictions (before the run): p40 and p56 +3-8% on the 16-token-page rows (4x4k
# causal in pages reads 0.86-0.90 of packed), level on packed rows (same objects).
B=build-s39d
source bench/results/call_prologue.sh
suite $B/test_prefill_cuda
for v in p40 p56; do prefill_grid $B/$v/test_prefill_cuda $v; done
timeout 200 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 6 \
  --only d128-4x4k-c-p16,d128-4x4k-p16,d128-1x2k+30k-c-p16,d128-skew-c-p16,d128-1x16k-c-p16,d128-4x4k-c-p64,d128-mix-c-p16,d128-4x4k-c \
  --config p40=@$B/p40/libflashserve_c.so --config p56=@$B/p56/libflashserve_c.so > "$out/ab_paged.log" 2>&1
echo "$(el) ab paged rc $?"; cat "$out/ab_paged.log"
pack_out
