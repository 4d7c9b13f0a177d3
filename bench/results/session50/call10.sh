#!/usr/bin/env bash
# Session 50 call 10 (issue 22), carry build-s50 (prep10.sh: the tree's build, v4.36 with the
# softmax partials seeded from their first tile, its GPU tests; v4.35's library; build-l2h's
# library, v4.36 without the seeding): 1. the tree's GPU suites, compute-sanitizer over the ws
# kernels; 2. the tree against v4.35 (its default: no L2 hints, 32 MB sections) and against
# l2h (FLASHSERVE_PREFILL_WS_L2_MB=8: the same but the seeded partials) on the prefill rows,
# 6 passes; 3. decode beside v4.35 (bench_decode --quick: the softmax's seeding changes decode's
# code too); 4. ncu's DRAM bytes of the tree at rows 8, 16, 3, 18 (calls 5-6: 555, 505, 411, 376
# MB against FA3's 263, 264, 260 and cuDNN's 262).
# Predictions: the tree against v4.35 +2-6% on the causal rows, level non-causal; the seeding
# +0-1.5% at d 64 (16 of a plain tile's 465 instructions), level at d 128 / 256 and decode;
# DRAM bytes at most 1.3x the compulsory.
B=build-s50
source bench/results/call_prologue.sh
set +e
suite $B/test_prefill_cuda 120 test_prefill_cuda
suite $B/test_decode_cuda 120 test_decode_cuda
suite $B/test_fp8_cuda 120 test_fp8_cuda
ab tree 6 18,1,16,3,21,8,5,10,0,7,2,17,4,9,13,11,37,6,24,34 v435=@$B/v435/libflashserve_c.so \
  l2h=@$B/l2h/libflashserve_c.so,FLASHSERVE_PREFILL_WS_L2_MB=8
python3 bench/ab_paired.py "$out/ab_tree.log" 2>&1 | tail -22
timeout 150 python3 bench/bench_decode.py --lib $B/libflashserve_c.so --quick --no-flex \
  --variant v435=$B/v435/libflashserve_c.so > "$out/bench_decode.log" 2>&1
echo "$(el) decode rc $?"; tail -n 16 "$out/bench_decode.log"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for row in 8 16 3 18; do
  timeout 50 $NCU --clock-control none --section MemoryWorkloadAnalysis --section SpeedOfLight -k "regex:prefill_sm90_ws" \
    --launch-skip 2 --launch-count 1 -f -o /tmp/rep_$row python3 bench/ncu_prefill.py --lib $B/libflashserve_c.so \
    --row $row > /dev/null 2>&1
  $NCU -i /tmp/rep_$row.ncu-rep --page raw --csv 2>/dev/null > "$out/raw_tree_$row.csv"
  python3 - "$out/raw_tree_$row.csv" $row <<'PY' | tee -a "$out/ncu_dram.txt"
import csv, sys
r = list(csv.reader(open(sys.argv[1])))
if len(r) < 3:
    print(f"ncu row {sys.argv[2]}: no report"); sys.exit()
m = {n: (u, v) for n, u, v in zip(r[0], r[1], r[2])}
keys = ("gpu__time_duration.sum", "dram__bytes.sum.per_second", "lts__t_sector_hit_rate.pct")
print(f"ncu row {sys.argv[2]}: " + "; ".join(f"{k} {m[k][1]} {m[k][0]}" for k in keys if k in m))
PY
done
# Last (the device time's end cuts them first): compute-sanitizer over the ws kernels alone.
SAN_KERNELS=prefill_sm90_ws sanitize memcheck 60 $B/test_prefill_cuda 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/1*:PrefillCuda.BigPages' memcheck
SAN_KERNELS=prefill_sm90_ws sanitize synccheck 45 $B/test_prefill_cuda 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/2*' synccheck
SAN_KERNELS=prefill_sm90_ws sanitize racecheck 45 $B/test_prefill_cuda 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/21' race21
pack_out
