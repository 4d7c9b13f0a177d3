"""bench_prefill.py's short table, from its rows: printed last by bench_prefill.py, or rebuilt
here from the JSON lines of one or more of its logs (a run split across GPU calls, or one cut
short by its time limit), without torch or a GPU.
Usage: python3 bench/prefill_table.py LOG [LOG ...]   (a row seen twice: the later log's)"""
import json
import sys

COLS = ["ours", "ws", "ws_alt", "ws_order0", "ours_paged16", "v3", "mma", "flash", "cudnn", "fa3", "flashinfer",
        "fa3_paged16", "flashinfer_paged16"]


def print_table(rows):
    """The table: every column, ours ÷ the best peer, the largest difference from FA3 (or SDPA
    flash), and the largest spread over the rounds; then the FP8 pages' ratio where a row has it."""
    print(f"{'dtype':<6}{'d':>4} {'shape':<14}{'causal':>7}" + "".join(f"{c:>9}" for c in COLS) +
          f"{'÷best':>7}{'maxdiff':>9}{'spread':>8}")
    f = lambda v, w, p=0: f"{v:>{w}.{p}f}" if v is not None else f"{'-':>{w}}"  # noqa: E731
    for r in rows:
        ratio = r["ours"] / r["best_peer"] if r.get("best_peer") and r.get("ours") else None
        md = r.get("fa3_maxdiff", r.get("flash_maxdiff"))
        print(f"{r['dtype'][:6]:<6}{r['head_dim']:>4} {r['shape']:<14}{str(r['causal']):>7}" +
              "".join(f(r.get(c), 9) for c in COLS) + f"{f(ratio, 7, 2)}{f(md, 9, 4)}" +
              f"{f(100 * max([v for k, v in r.items() if k.endswith('_spread')] or [0]), 7)}%")
    for r in rows:  # FP8 pages (issue 25's target: within 10% of the bf16 pages' TFLOP/s)
        if r.get("ours_paged16_e4m3") and r.get("ours"):
            print(f"FP8 e4m3 pages, {r['shape']}: {r['ours_paged16_e4m3']:.0f} TFLOP/s, {r['ours_paged16_e4m3'] / r['ours']:.2f}"
                  f" of bf16 pages ({r['ours']:.0f}); max |o - FA3 over bf16| {r.get('ours_paged16_e4m3_maxdiff')}")


def rows_of_logs(paths):
    """The rows of bench_prefill logs (their JSON lines), in order, a later log's row replacing an
    earlier one of the same (dtype, head_dim, shape, causal)."""
    rows = {}
    for path in paths:
        with open(path) as fh:
            for line in fh:
                if line.startswith("{"):
                    r = json.loads(line)
                    rows[(r["dtype"], r["head_dim"], r["shape"], r["causal"])] = r
    return list(rows.values())


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print_table(rows_of_logs(sys.argv[1:]))
