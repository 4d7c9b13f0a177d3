"""Summaries of an ncu source page exported as CSV (`ncu -i REP --page source --print-source sass
--csv`, bench/results/session54/call3.sh): one kernel's SASS, a line an instruction, with the
counts ncu attached (instructions executed, warp stall samples). Prints the executed instructions
by opcode (warp-level: a line's "Instructions Executed"), the stall samples by opcode, and the
lines that hold the most samples, for comparing two kernels' mixes (ours against cuDNN's at d 64,
issue 22) without a GUI. Column names are matched loosely (ncu versions name them differently);
--columns lists what the file has.
Usage: python3 bench/ncu_sass.py FILE.csv[.xz] [--top 40] [--columns]"""
import argparse
import csv
import io
import lzma
import re
import sys
from collections import Counter


def open_text(path):
    if path.endswith(".xz"):
        return io.TextIOWrapper(lzma.open(path), encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def find_col(header, *needles):
    """The first column whose name holds every needle (case-insensitive), or None."""
    for i, name in enumerate(header):
        low = name.lower()
        if all(n in low for n in needles):
            return i
    return None


def number(s):
    s = s.replace(",", "").strip()
    try:
        return float(s)
    except ValueError:
        return 0.0


def opcode(source):
    """A SASS line's opcode without its predicate and modifiers ('@!P0 FMNMX.FTZ R1, ...' -> FMNMX)."""
    text = re.sub(r"^\s*@!?U?P\w+\s+", "", source.strip())
    m = re.match(r"([A-Z][A-Z0-9_]*)", text)
    return m.group(1) if m else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--columns", action="store_true", help="list the header's columns and stop")
    args = ap.parse_args()
    rows = list(csv.reader(open_text(args.path)))
    head_at = next((i for i, r in enumerate(rows) if any(c.strip().lower() == "source" for c in r)), None)
    if head_at is None:
        sys.exit(f"{args.path}: no header with a 'Source' column (first line: {rows[0] if rows else 'empty'})")
    header = rows[head_at]
    if args.columns:
        for i, name in enumerate(header):
            print(i, name)
        return
    src = next(i for i, c in enumerate(header) if c.strip().lower() == "source")
    addr = find_col(header, "address")
    execd = find_col(header, "instructions executed")
    if execd is None:
        execd = find_col(header, "inst_executed")
    stall = find_col(header, "stall sampling", "all")
    if stall is None:
        stall = find_col(header, "sampling")
    lines = []
    for r in rows[head_at + 1:]:
        if len(r) <= src or not r[src].strip():
            continue
        lines.append((r[addr] if addr is not None else "", r[src].strip(),
                      number(r[execd]) if execd is not None and execd < len(r) else 0.0,
                      number(r[stall]) if stall is not None and stall < len(r) else 0.0))
    total_exec = sum(x[2] for x in lines) or 1.0
    total_stall = sum(x[3] for x in lines) or 1.0
    by_exec, by_stall = Counter(), Counter()
    for _, s, e, st in lines:
        by_exec[opcode(s)] += e
        by_stall[opcode(s)] += st
    print(f"{args.path}: {len(lines)} SASS lines, {total_exec:.4g} warp instructions executed, "
          f"{total_stall:.4g} stall samples (columns: executed {header[execd] if execd is not None else '-'}, "
          f"samples {header[stall] if stall is not None else '-'})")
    print("\nopcode            executed   share   samples   share")
    for op, e in by_exec.most_common(30):
        print(f"{op:<14}{e:>12.4g}{e / total_exec:>8.1%}{by_stall[op]:>10.4g}{by_stall[op] / total_stall:>8.1%}")
    print(f"\nthe {args.top} lines with the most stall samples:")
    for a, s, e, st in sorted(lines, key=lambda x: -x[3])[:args.top]:
        print(f"{a:>8} {st:>8.4g} {st / total_stall:>6.1%} {e:>10.4g}  {s[:90]}")


if __name__ == "__main__":
    main()
