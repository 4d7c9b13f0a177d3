"""Paired medians of an ab_prefill.py log: for each row (d, shape, causal, paged) and each column
after the first, the median over the passes of the pass's ratio against the first column, and
how many passes it was above. ab_prefill prints a row's passes in its order, the columns side by
side (first line: the header; "(again)" lines: the later passes).

Usage: python3 bench/ab_paired.py LOG [LOG ...]"""
import statistics
import sys


def parse(path):
    cols, rows = None, {}
    for line in open(path):
        f = line.split()
        if not f:
            continue
        if f[0] == "d" and "causal" in f:
            cols = f[4:]
            continue
        if cols is None or not f[0].isdigit() or len(f) < 4 + len(cols):
            continue
        try:
            vals = [float(x) for x in f[4:4 + len(cols)]]
        except ValueError:
            continue
        rows.setdefault(tuple(f[:4]), []).append(vals)
    return cols, rows


def main():
    for path in sys.argv[1:]:
        cols, rows = parse(path)
        if cols is None:
            print(f"{path}: no ab header")
            continue
        print(f"{path}\n{'d':>4} {'shape':<10}{'causal':<7}{'paged':>5} {cols[0]:>9}" +
              "".join(f"{c:>16}" for c in cols[1:]))
        for key, passes in rows.items():
            base = statistics.median(p[0] for p in passes)
            cells = []
            for j in range(1, len(cols)):
                r = [p[j] / p[0] for p in passes if p[0] > 0]
                up = sum(x > 1 for x in r)
                cells.append(f"{100 * (statistics.median(r) - 1):+7.1f}% {up:>2}/{len(r):<3}")
            print(f"{key[0]:>4} {key[1]:<10}{key[2]:<7}{key[3]:>5} {base:>9.0f}" + "".join(f"{c:>16}" for c in cells))


if __name__ == "__main__":
    main()
