#!/usr/bin/env bash
# Per-SASS-instruction warp stall samples of one warp-specialized prefill launch (ncu source
# page), to see where the producer and consumer warps wait. Usage:
#   bash bench/ncu_source.sh OUTDIR NAME "<profile_prefill.py args>" [VAR=VAL ...]
# writes OUTDIR/src_NAME.csv and prints the 25 instructions with the most samples. LIB: another
# library (build-gpu's by default).
set -uo pipefail
cd "$(dirname "$0")/.."
out="$1" name="$2" shape="$3"; shift 3
command -v ncu >/dev/null || { echo "ncu_source: no ncu here"; exit 0; }
env "$@" timeout 200 ncu --clock-control none -k "regex:prefill_sm90_ws" --launch-skip 2 --launch-count 1 \
  --section SourceCounters --section WarpStateStats -f -o "$out/rep_$name" \
  python3 bench/profile_prefill.py --lib "${LIB:-build-gpu/libflashserve_c.so}" $shape > "$out/ncu_src_$name.log" 2>&1
ncu -i "$out/rep_$name.ncu-rep" --page source --csv --print-source sass > "$out/src_$name.csv" 2>/dev/null
rm -f "$out/rep_$name.ncu-rep"
python3 - "$out/src_$name.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
rows = rows[[i for i, r in enumerate(rows) if r[0] == "Address"][0]:]  # past the kernel-name line
hdr = rows[0]
def col(*names):
    for n in names:
        for i, h in enumerate(hdr):
            if h.strip().startswith(n): return i
    return None
ia, isrc, ism = col("Address"), col("Source"), col("Warp Stall Sampling (All")
data = [r for r in rows[1:] if len(r) > max(ia, isrc, ism)]
tot = sum(float(r[ism] or 0) for r in data)
for r in sorted(data, key=lambda r: -float(r[ism] or 0))[:25]:
    print(f"{r[ia]:>8} {float(r[ism] or 0) / tot * 100:5.1f}%  {r[isrc][:90]}")
PY
