#!/usr/bin/env bash
# Session 39's second call (issue 22). build-s39b/: the library to land, prefill v4.27 (the ws
# instances at d 64 and d 128 in two forms, without and with the logit transform's code; the
# no-transform ones have the plain run: their SASS is call 1's tf (d 64) and nt128p (d 128, both
# key tiles), md5; the d 128 transform, d 256 and FP8 objects are main's, md5; the d 64 transform
# ones lost their dead plain run: 8928 -> 8320 instructions, tested here by MaskOptions at d 64,
# new) with its test_prefill_cuda and test_fp8_cuda; base/ (main's library, ad89890); m128/ (d 64
# at 128 query rows, two consumer warpgroups: FLASHSERVE_PREFILL_WS_D64_ROWS=128) with its
# test_prefill_cuda; nt256/ (d 256's instances without the transform's code, with the plain run:
# FLASHSERVE_PREFILL_WS_NO_TRANSFORM_HD=256; 6480 -> 4744 instructions, local loads 6 -> 2).
# Predictions (before the run): v4.27 against main as call 1's tf and nt128p (d 64 +1.5-4% by
# ws, d 128 +1-6.5%); m128 at d 64 16x1k causal by ws 190 -> 230-250 (192-row items compute 67%
# useful causal scores at 1k, 128-row ones 89%), 16x1k +3-8%, long rows -3..-8% (a K/V tile
# serves 128 rows, not 192); nt256 +2-5% on both d 256 rows.
B=build-s39b
source bench/results/call_prologue.sh
for t in test_prefill_cuda test_fp8_cuda; do suite $B/$t; done
prefill_grid $B/m128/test_prefill_cuda m128
D64=d64-16x1k,d64-16x1k-c,d64-4x4k,d64-4x4k-c,d64-1x16k,d64-1x16k-c,d64-skew-c,d64-4x4k-c-p16
D128=d128-16x1k,d128-16x1k-c,d128-4x4k-c,d128-8x2k-c,d128-skew-c,d128-4x4k,d128-1x16k,d128-1x16k-c,d128-4x4k-c-p16,d128-1x2k+30k-c-p16
timeout 200 python3 bench/ab_prefill.py --lib $B/base/libflashserve_c.so --passes 6 --only $D128,$D64,d256-1x16k,d256-1x16k-c \
  --config v427=@$B/libflashserve_c.so > "$out/ab_main.log" 2>&1
echo "$(el) ab main rc $?"; cat "$out/ab_main.log"
timeout 120 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 6 --only $D64,d256-1x16k,d256-1x16k-c \
  --config ws=FLASHSERVE_PREFILL_KERNEL=ws --config m128=@$B/m128/libflashserve_c.so,FLASHSERVE_PREFILL_KERNEL=ws \
  --config nt256=@$B/nt256/libflashserve_c.so > "$out/ab_var.log" 2>&1
echo "$(el) ab var rc $?"; cat "$out/ab_var.log"
# Sanitizers on v4.27's ws kernels (only they instrumented): grid cases 9 / 10 (d 64 bf16 causal,
# packed / 16-token pages, heads 1/1) and 21 / 22 (d 128 alike); MaskOptions (d 64 and d 128,
# softcap and ALiBi: the transform instances) under memcheck.
G=Gpu/PrefillCudaGrid.MatchesReferenceAndCpu
ws_sanitize $B/test_prefill_cuda "$G/9:$G/22:PrefillCuda.MaskOptions" "$G/10:$G/21" 9 22
pack_out
