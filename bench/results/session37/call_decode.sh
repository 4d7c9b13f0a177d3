#!/usr/bin/env bash
# Session 37, the decode call (issue 25): build-dec/ from prep_decode.sh.
#  - tests: the persistent kernel's test_fp8_cuda (FP8 instances all persistent; the new
#    Fp8DecodeCuda.MoreItemsThanResidentCtas: 400 and 300 sequences, several items a CTA, empty
#    splits, 16- and 24-row blocks), the tree's test_fp8_cuda and test_decode_cuda (the per-item
#    kernel through the shared device functions: its SASS moved, +40-56 instructions outside
#    the tile loop, whose opcode counts are unchanged);
#  - bench_decode --fp8 e4m3, base (HEAD's library) against persist (the tree's 16-bit per-item
#    kernel, FP8 persistent), no Flex. Prediction: FP8 (256,1k) 1.59 -> 1.8-1.9x bf16 on an
#    H200 (the H100's bf16 is slower: 1.87 -> ~2.0), (128,2k) +4-8%, (64,8k) +1-2%, one-wave
#    rows ((1,32k), (32,4k)) level; bf16 level (same tile loop);
#  - memcheck, racecheck and synccheck on MoreItemsThanResidentCtas (persistent).
# Run in session 37 on an H100 (call 2): the persistent kernel lost 2-5% (the per-item kernel
# already reads at 96-100% of the copy rate there) and 26% on the mixed batch. Since then the
# variant launches it only where items are more than a wave, of one split and unpaired (the
# batch rows), the per-item kernel elsewhere: worth running again only on an H200, where
# (256,1k) reads at 87% of copy.
B=build-dec
source bench/results/call_prologue.sh
for t in persist/test_fp8_cuda test_fp8_cuda test_decode_cuda; do
  log="$out/$(tr / _ <<<"$t").log"
  timeout 150 "$B/$t" --gtest_brief=1 > "$log" 2>&1
  echo "$(el) $t rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$log" | tr '\n' ' ')"
  grep -E "Failure|FAILED|NOTE" "$log" | head -6
done
timeout 300 python3 bench/bench_decode.py --lib $B/base/libflashserve_c.so --variant persist=$B/persist/libflashserve_c.so \
  --fp8 e4m3 --no-flex > "$out/bench_decode.log" 2>&1
echo "$(el) bench_decode rc $?"; grep -vE '^\{' "$out/bench_decode.log" | tail -22
sanitize memcheck 90 $B/persist/test_fp8_cuda 'Fp8DecodeCuda.MoreItemsThanResidentCtas'
sanitize synccheck 60 $B/persist/test_fp8_cuda 'Fp8DecodeCuda.MoreItemsThanResidentCtas'
sanitize racecheck 120 $B/persist/test_fp8_cuda 'Fp8DecodeCuda.MoreItemsThanResidentCtas'
pack_out
