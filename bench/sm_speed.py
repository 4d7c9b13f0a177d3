"""Per-SM speed from the split kernel's trace (`trace_decode.py --dump DIR`, a trace build): for
each CSV (one shape, three eager calls), each SM's mean loop time over its CTAs, how well an SM's
speed in one call predicts it in another (correlation), the spread, and the fast and slow SMs;
with two or more CSVs, the correlation of the SMs' speeds between shapes.

Usage: python3 bench/sm_speed.py DIR/trace_64x8192.csv [DIR/trace_32x4096.csv ...]"""
import csv
import math
import statistics
import sys
from collections import defaultdict


def corr(x, y):
    mx, my = statistics.mean(x), statistics.mean(y)
    sx = math.sqrt(sum((a - mx) ** 2 for a in x))
    sy = math.sqrt(sum((b - my) ** 2 for b in y))
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / (sx * sy) if sx > 0 and sy > 0 else float("nan")


def sm_loops(path):
    """{call: {sm: [loop us of its CTAs]}} (loop: first tile landed -> last tile done)."""
    out = defaultdict(lambda: defaultdict(list))
    with open(path) as f:
        for r in csv.DictReader(f):
            out[int(r["call"])][int(r["sm"])].append(float(r["loop"]) - float(r["first"]))
    return out


def main():
    paths = sys.argv[1:]
    if not paths:
        sys.exit(__doc__)
    means = {}
    for path in paths:
        calls = sm_loops(path)
        per_call = {c: {sm: statistics.mean(v) for sm, v in d.items()} for c, d in calls.items()}
        sms = sorted(set.intersection(*(set(d) for d in per_call.values())))
        cs = sorted(per_call)
        pairs = [(a, b) for i, a in enumerate(cs) for b in cs[i + 1:]]
        cc = [corr([per_call[a][s] for s in sms], [per_call[b][s] for s in sms]) for a, b in pairs]
        overall = {s: statistics.mean(per_call[c][s] for c in cs) for s in sms}
        means[path] = overall
        v = sorted(overall.values())
        q = lambda f: v[min(len(v) - 1, int(f * len(v)))]  # noqa: E731
        print(f"{path}: {len(sms)} SMs, {len(cs)} calls; SM mean loop us: min {v[0]:.1f} p10 {q(0.1):.1f} "
              f"median {q(0.5):.1f} p90 {q(0.9):.1f} max {v[-1]:.1f}")
        print("  call-to-call correlation of the SMs' speeds: " + ", ".join(f"{x:.2f}" for x in cc))
        ranked = sorted(sms, key=overall.get)
        print(f"  fastest: {[(s, round(overall[s], 1)) for s in ranked[:8]]}")
        print(f"  slowest: {[(s, round(overall[s], 1)) for s in ranked[-8:]]}")
    for i, a in enumerate(paths):
        for b in paths[i + 1:]:
            common = sorted(set(means[a]) & set(means[b]))
            print(f"{a} vs {b}: correlation of the SMs' speeds {corr([means[a][s] for s in common], [means[b][s] for s in common]):.2f} "
                  f"over {len(common)} SMs")


if __name__ == "__main__":
    main()
