"""Issue 27's per-step time breakdown: one decode step's kernels (bench_model --profile-step under
ncu --profile-from-start off --csv --metrics gpu__time_duration.sum) summed by part of the step.
Kernels run one at a time under ncu (no programmatic-dependent overlap), so the sum is the
kernels' own time; the step's graph replay (bench_model's table) is the real one.
Usage: python3 bench/step_breakdown.py NCU_CSV [LABEL]"""
import csv
import sys
from collections import OrderedDict

PARTS = OrderedDict([
    ("GEMM, skinny", ("skinny_gemm_kernel",)),
    ("GEMM epilogues", ("skinny_finish", "skinny_residual", "skinny_norm", "skinny_rope")),
    ("GEMM, cuBLAS", ("gemm", "gemv", "xmma", "cutlass", "sm90_", "sm80_")),
    ("attention (decode split + merge)", ("decode", "merge")),
    ("rotary + append", ("rope_append",)),
    ("norms", ("rms_norm",)),
    ("sampling", ("sample_kernel",)),
    ("other", ("",)),
])
SCALE = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}


def part_of(name):
    for part, keys in PARTS.items():
        if any(k in name for k in keys):
            return part
    return "other"


def main():
    path = sys.argv[1]
    label = sys.argv[2] if len(sys.argv) > 2 else path
    rows = [r for r in csv.DictReader(l for l in open(path) if l.startswith('"'))]
    total = {p: [0.0, 0] for p in PARTS}
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        us = float(r["Metric Value"].replace(",", "")) * SCALE.get(r.get("Metric Unit", "usecond"), 1.0)
        t = total[part_of(r["Kernel Name"])]
        t[0] += us
        t[1] += 1
    s = sum(v[0] for v in total.values())
    print(f"| {label} | kernels | us | share |")
    print("|---|---|---|---|")
    for p, (us, n) in total.items():
        if n:
            print(f"| {p} | {n} | {us:.1f} | {100 * us / s:.1f}% |")
    print(f"| all | {sum(v[1] for v in total.values())} | {s:.1f} | |")


if __name__ == "__main__":
    main()
