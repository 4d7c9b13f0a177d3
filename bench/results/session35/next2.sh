#!/usr/bin/env bash
# The next GPU session's second call (written in session 35; the same build-call/ as next1.sh):
#  - issue 22: bench_prefill.py's ws_alt column from fs_prefill_ws_key_tile (first run), the
#    chunked row and the paged-only rows, d 128;
#  - issue 25: the FP8 variants' tests (regmap, fp8v), then one ab of the FP8 rows (11: bf16
#    pages; 29-31: FP8) over: main's default (e4m3 copy path, e5m2 register path), main with every
#    FP8 pool by the register path (reg) or by the copy path (copy), regmap by the register path,
#    fp8v by the register path and by its default, hi by its default.
#    Predictions (session 35, from the SASS: the register path's tile loop 890 -> 686
#    instructions, its integer-pipe operations a 16-code chunk ~24 -> ~15 on e4m3): regmap +3-6%
#    over reg on both dtypes; fp8v's e4m3 by the register path +10-15% over reg, at or above
#    session 34's e4m3-as-e5m2 diagnosis (513 on an H100, 0.9 of bf16 pages); e5m2 +4-8%; hi on
#    the copy path level (the copy path is bound by shared memory, session 30);
#  - pipe_rates (session 35's rows: whether IMAD.HI runs beside cvt e4m3x2 at full rate).
B=build-call
source bench/results/call_prologue.sh
timeout 120 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --chunked-only --rounds 2 > "$out/bench_chunked.log" 2>&1
echo "$(el) bench chunked rc $?"; tail -8 "$out/bench_chunked.log"
timeout 120 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --paged-only --rounds 2 > "$out/bench_paged.log" 2>&1
echo "$(el) bench paged rc $?"; tail -8 "$out/bench_paged.log"
for v in regmap fp8v; do
  timeout 60 $B/$v/test_fp8_cuda --gtest_brief=1 > "$out/test_fp8_$v.log" 2>&1
  echo "$(el) $v test_fp8_cuda rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_fp8_$v.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED" "$out/test_fp8_$v.log" | head -4
done
timeout 200 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 --only 11,29,30,31 \
  --config reg=FLASHSERVE_PREFILL_WS_FP8_PATH=reg --config copy=FLASHSERVE_PREFILL_WS_FP8_PATH=copy \
  --config regmap=@$B/regmap/libflashserve_c.so,FLASHSERVE_PREFILL_WS_FP8_PATH=reg \
  --config fp8v=@$B/fp8v/libflashserve_c.so,FLASHSERVE_PREFILL_WS_FP8_PATH=reg \
  --config fp8vdef=@$B/fp8v/libflashserve_c.so --config hi=@$B/hi/libflashserve_c.so > "$out/ab_fp8.log" 2>&1
echo "$(el) ab fp8 rc $?"; grep -v again "$out/ab_fp8.log"
timeout 60 $B/tools/pipe_rates > "$out/pipe_rates.log" 2>&1
echo "$(el) pipe_rates rc $?"; tail -8 "$out/pipe_rates.log"
pack_out
