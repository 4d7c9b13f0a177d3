"""Anatomy of the warp-specialized prefill kernel, from a build configured with
-DFLASHSERVE_PREFILL_TRACE=ON (attention/cuda/prefill_sm90_ws_kernel.cuh, WsTrace: every CTA stamps
its entry and exit, and each of its first 32 items' phases, consumer warpgroup by warpgroup).
For each row of ab_prefill.py's ROWS (and each --config's environment): times the call as
ab_prefill.py does (L2 flushed), then traces one more call and prints, in microseconds, means over
the items: Q wait, K(0) wait, first issue slot, first tile (S(0) and its softmax), the main loop a
tile, drain (the last P·V), store; the gaps between items on an SM (a CTA's exit to the next's
entry, or a persistent CTA's item to item); and the overhead an item beyond its tiles at the main
loop's pace, in tiles; then the items by their key tiles (buckets): the pace a tile and an item's
cost beyond its tiles, so that the boundary's cost reads apart from the rows' lengths; and the main
loop's pace before and after the plain run's end (the masked tiles apart: plain_runs). --dump DIR
keeps each call's records (the CTAs that ran, the items used) as .npz; --read DIR prints the
buckets of such a dump again (no GPU).

Usage: python3 bench/trace_prefill.py --lib build-trace/libflashserve_c.so --only 0,2,3 [--config NAME=VAR=VAL,...]
       python3 bench/trace_prefill.py --read DIR"""
import argparse
import glob
import os
import sys
import tempfile

import numpy as np

MAGIC = 0x3165636172747366
HEADER, ITEMS, EVENTS = 8, 32, 32  # WsTrace's layout


def read(path):
    raw = np.fromfile(path, dtype=np.uint64)
    head = raw[:8].astype(np.int64)
    if int(head[0]) != MAGIC:
        raise ValueError(f"{path}: not a prefill trace")
    ctas, words = int(head[1]), int(head[2])
    rec = raw[8:8 + ctas * words].reshape(ctas, words).astype(np.float64)
    rec = rec[rec[:, 1] > 0]  # CTAs that ran (and were recorded)
    meta = dict(block_m=int(head[3]), block_n=int(head[4]), consumers=int(head[5]), persistent=int(head[6]),
                causal=int(head[7]))
    return rec, meta


def clock(rec):
    """The SMs' clock in cycles a ns, pooled over the CTAs (clock64 against the global timer), and
    a cycle in microseconds."""
    ghz = (rec[:, 4] - rec[:, 2]).sum() / (rec[:, 5] - rec[:, 1]).sum()
    return ghz, 1e-3 / ghz


def item_events(rec):
    """Each recorded item's kEvents words, CTA by CTA (its first ITEMS items)."""
    for r in rec:
        for i in range(min(int(r[6]), ITEMS)):
            yield r[HEADER + i * EVENTS: HEADER + (i + 1) * EVENTS]


def anatomy(rec, meta):
    """The summary of one traced call: a dict of means (microseconds) and counts."""
    ghz, us = clock(rec)
    n_wg = meta["consumers"]
    out = {"ctas": len(rec), "sms": len(np.unique(rec[:, 0])), "ghz": ghz}
    t0 = rec[:, 1].min()
    out["span"] = (rec[:, 5].max() - t0) * 1e-3
    life = (rec[:, 5] - rec[:, 1]) * 1e-3
    out["life"] = life.mean()
    out["setup"] = ((rec[:, 3] - rec[:, 2]) * us).mean()
    out["busy"] = life.sum() / (out["sms"] * out["span"])
    # The SMs' last exits: how long the grid's tail runs on fewer SMs.
    last = np.array([rec[rec[:, 0] == sm, 5].max() for sm in np.unique(rec[:, 0])])
    out["tail"] = (rec[:, 5].max() - np.median(last)) * 1e-3
    # Gaps between CTAs on one SM (one CTA an item: the hardware's dispatch).
    gaps = []
    for sm in np.unique(rec[:, 0]):
        r = rec[rec[:, 0] == sm]
        r = r[np.argsort(r[:, 1])]
        gaps.extend(((r[1:, 1] - r[:-1, 5]) * 1e-3).tolist())
    out["cta_gap"] = float(np.mean(gaps)) if gaps else 0.0
    phases = {k: [] for k in ("q", "k0", "slot", "first", "tile", "drain", "store", "item", "next", "prod_q")}
    over, tiles_all = [], []
    for r in rec:
        items = min(int(r[6]), ITEMS)
        for i in range(items):
            e = r[HEADER + i * EVENTS: HEADER + (i + 1) * EVENTS]
            tiles = int(e[25])
            if tiles <= 0:
                continue
            tiles_all.append(tiles)
            for c in range(n_wg):
                s = e[8 * c: 8 * c + 8]
                phases["q"].append((s[1] - s[0]) * us)
                phases["k0"].append((s[2] - s[1]) * us)
                phases["slot"].append((s[3] - s[2]) * us)
                phases["first"].append((s[4] - s[3]) * us)
                if tiles > 1:
                    phases["tile"].append((s[5] - s[4]) * us / (tiles - 1))
                phases["drain"].append((s[6] - s[5]) * us)
                phases["store"].append((s[7] - s[6]) * us)
                phases["item"].append((s[7] - s[0]) * us)
                if i + 1 < items:
                    phases["next"].append((r[HEADER + (i + 1) * EVENTS + 8 * c] - s[7]) * us)
            if e[29] > 0:
                phases["prod_q"].append((e[29] - e[28]) * us)
    for k, v in phases.items():
        out[k] = float(np.mean(v)) if v else float("nan")
    out["tiles"] = float(np.mean(tiles_all)) if tiles_all else 0.0
    # An item's cost beyond its tiles at the main loop's pace, in tiles: the last warpgroup's item
    # time, plus the gap to the next item (persistent) or the CTA's setup and the gap between CTAs.
    pace = out["tile"]
    between = out["next"] if meta["persistent"] and not np.isnan(out["next"]) else out["cta_gap"] + out["setup"]
    out["over_tiles"] = (out["item"] + between - out["tiles"] * pace) / pace if pace > 0 else float("nan")
    out.update(fine(rec, meta, us))
    return out


def fine(rec, meta, us):
    """The item boundary in finer steps (microseconds, means over items and warpgroups; NaN where a
    build or walk does not stamp them): the dynamic walk's wait for the next item's slot (nwait,
    from the last item's store done) and the item's view after it (ndec); the store's first barrier
    (sbar, from the last P·V retired), O into its buffer (ssts), the fence and second barrier
    (sfen), the TMA store's issue (stma); the producer: its last load of an item ahead of the last
    P·V's retirement (pahead), its claim and view of the next item (pclaim: last load to the next
    item's start), the next Q issued ahead of the consumers' store done (qahead). The producer
    counts its items apart from the consumers (an item whose rows see no keys has no Q and counts
    for the consumers only), so its three pair the wrong items after such an item."""
    keys = ("nwait", "ndec", "sbar", "ssts", "sfen", "stma", "pahead", "pclaim", "qahead")
    acc = {k: [] for k in keys}
    for r in rec:
        items = min(int(r[6]), ITEMS)
        ev = [r[HEADER + i * EVENTS: HEADER + (i + 1) * EVENTS] for i in range(items)]
        for i, e in enumerate(ev):
            if int(e[25]) <= 0:
                continue
            # (The consumers' finer steps: two warpgroups only; with three, words 16-23 are the
            # third's own stamps.)
            for c in range(meta["consumers"] if meta["consumers"] == 2 else 0):
                s, f = e[8 * c: 8 * c + 8], e[16 + 4 * c: 20 + 4 * c]
                if f[1] > 0:
                    acc["sbar"].append((f[1] - s[6]) * us)
                if f[2] > 0 and f[1] > 0:
                    acc["ssts"].append((f[2] - f[1]) * us)
                if f[3] > 0 and f[2] > 0:
                    acc["sfen"].append((f[3] - f[2]) * us)
                    acc["stma"].append((s[7] - f[3]) * us)
                if f[0] > 0 and i > 0 and int(ev[i - 1][25]) > 0:
                    acc["nwait"].append((f[0] - ev[i - 1][8 * c + 7]) * us)
                    acc["ndec"].append((s[0] - f[0]) * us)
            last_pv = max(e[8 * c + 6] for c in range(meta["consumers"]))
            done = min(e[8 * c + 7] for c in range(meta["consumers"]))
            if e[26] > 0:
                acc["pahead"].append((last_pv - e[26]) * us)
                if i + 1 < items and ev[i + 1][28] > 0:
                    acc["pclaim"].append((ev[i + 1][28] - e[26]) * us)
            if i + 1 < items and ev[i + 1][29] > 0:
                acc["qahead"].append((done - ev[i + 1][29]) * us)
    return {k: float(np.mean(v)) if v else float("nan") for k, v in acc.items()}


def buckets(rec, meta):
    """Lines of the items by key tiles ([1,2), [2,4), ... [128,inf)): count, the main loop's pace a
    tile, the item (its first start to its last store done, over the warpgroups), its start to the
    first tile's softmax done, and the item beyond its tiles at the call's pace (the median over
    the items of more than one tile; us, medians)."""
    us = clock(rec)[1]
    n_wg = meta["consumers"]
    items = []
    for e in item_events(rec):
        t = int(e[25])
        if t > 0:
            s = [e[8 * c: 8 * c + 8] for c in range(n_wg)]
            pace = max(x[5] - x[4] for x in s) * us / (t - 1) if t > 1 else float("nan")
            item = (max(x[7] for x in s) - min(x[0] for x in s)) * us
            first = (max(x[4] for x in s) - min(x[0] for x in s)) * us
            items.append((t, pace, item, first))
    if not items:
        return ["  (no items)"]
    a = np.array(items)
    multi = a[a[:, 0] > 1, 1]
    call_pace = float(np.median(multi)) if len(multi) else float("nan")
    lines = [f"  the call's pace {call_pace:.3f} us a tile"]
    for lo, hi in [(1, 2), (2, 4), (4, 8), (8, 16), (16, 32), (32, 64), (64, 128), (128, 1 << 30)]:
        m = (a[:, 0] >= lo) & (a[:, 0] < hi)
        if m.sum():
            over = a[m, 2] - a[m, 0] * call_pace
            lines.append(f"  tiles [{lo},{hi if hi < 1 << 30 else 'inf'}): {int(m.sum()):5d} items, pace "
                         f"{np.median(a[m, 1]):.3f} us a tile, item {np.median(a[m, 2]):.2f}, to the first softmax "
                         f"{np.median(a[m, 3]):.2f}, beyond its tiles {np.median(over):.2f}")
    return lines


def plain_runs(rec, meta):
    """Lines of the main loop split at the plain run's end (WsTrace words 27 and 31, consumer
    warpgroup 0; builds from session 49 on): the pace a tile of tiles 1 .. plain_hi - 1 (the plain
    run and any general tiles before it) and of the tiles after the run (the masked tiles of a
    causal row's diagonal, the half tile included), sums over the items over their tiles; and the
    items that never reach a plain run (all their tiles general). us."""
    us = clock(rec)[1]
    a_t = a_n = b_t = b_n = c_t = c_n = 0.0
    n_items = n_runs = before = 0
    for e in item_events(rec):
        t = int(e[25])
        if t <= 1:
            continue
        n_items += 1
        s = e[0:8]
        if e[27] <= 0:
            c_t += s[5] - s[4]
            c_n += t - 1
            continue
        w = int(e[31])
        lo, hi = w & 0xFFFF, (w >> 16) & 0xFFFF
        n_runs += 1
        before += max(lo - 1, 0)
        a_t += e[27] - s[4]
        a_n += hi - 1
        b_t += s[5] - e[27]
        b_n += t - hi
    if not n_items:
        return ["  (no items of two tiles or more)"]
    if not n_runs and not c_n:
        return ["  (no plain-run stamps: a build before session 49)"]
    f = lambda tm, n: f"{tm * us / n:.3f} us a tile over {int(n)} tiles" if n else "no tiles"  # noqa: E731
    return [f"  {n_runs} of {n_items} items reach a plain run: tiles before its end {f(a_t, a_n)} "
            f"({before} general tiles before runs), after it {f(b_t, b_n)}; the other items {f(c_t, c_n)}"]


def read_dumps(directory):
    for f in sorted(glob.glob(os.path.join(directory, "*.npz"))):
        z = np.load(f)
        meta = {k: int(z[k]) for k in z.files if k != "rec"}
        print(f"{os.path.basename(f)} ({meta.get('block_m')}x{meta.get('block_n')}, {meta.get('consumers')} consumers)")
        print("\n".join(buckets(z["rec"], meta) + plain_runs(z["rec"], meta)))


FINE = [(k, k, 7, 2) for k in ("nwait", "ndec", "sbar", "ssts", "sfen", "stma", "pahead", "pclaim", "qahead")]
COLS = [("span", "span", 8, 1), ("busy", "busy", 6, 2), ("tail", "tail", 6, 1), ("tiles", "tiles", 6, 1),
        ("life", "life", 7, 1), ("cta_gap", "gap", 6, 2), ("setup", "setup", 6, 2), ("q", "Q", 6, 2),
        ("k0", "K0", 6, 2), ("slot", "slot", 6, 2), ("first", "first", 6, 2), ("tile", "tile", 6, 3),
        ("drain", "drain", 6, 2), ("store", "store", 6, 2), ("next", "next", 6, 2), ("prod_q", "prodQ", 6, 2),
        ("over_tiles", "over", 6, 2)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib")
    ap.add_argument("--read", metavar="DIR", help="print the buckets of a --dump's records and stop")
    ap.add_argument("--only", help="comma-separated indices into ab_prefill.ROWS or row names (ab_prefill.row_name)")
    ap.add_argument("--config", action="append", default=[], help="NAME=VAR=VAL[,VAR=VAL]")
    ap.add_argument("--dump", metavar="DIR", help="keep each traced call's records there")
    args = ap.parse_args()
    if args.read:
        read_dumps(args.read)
        return
    if not args.lib:
        ap.error("--lib is needed (or --read)")
    import torch
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import ab_prefill as ab
    import bench_prefill as bp
    import flashserve_ctypes as fsc
    lib = fsc.load(args.lib)
    configs = [("default", {})] + [(c.partition("=")[0], dict(kv.split("=", 1) for kv in c.partition("=")[2].split(",")))
                                   for c in args.config]
    gen = torch.Generator(device="cuda").manual_seed(5)
    rows = ab.pick_rows(args.only)
    tmp = tempfile.mkdtemp()
    if args.dump:
        os.makedirs(args.dump, exist_ok=True)
    print(f"{'row':<22}{'config':<10}{'TFLOP/s':>8}" + "".join(f"{h:>{w}}" for _, h, w, _ in COLS), flush=True)
    fine_lines, bucket_lines = [], []
    for idx, row in rows:
        dim, lens, causal, bs = row[:4]
        runs, flops, label, keep = ab.setup_row(row, {None: lib}, gen)
        run = runs[None]
        for name, env in configs:
            os.environ.update(env)
            tflops = flops / bp.time_fn(run) / 1e12
            path = os.path.join(tmp, f"row{idx}_{name}.bin")
            os.environ["FLASHSERVE_PREFILL_TRACE"] = path
            bp.flush_l2()
            run()
            torch.cuda.synchronize()
            del os.environ["FLASHSERVE_PREFILL_TRACE"]
            for key in env:
                del os.environ[key]
            tag = f"{idx}:d{dim} {label}{' c' if causal else ''}{f' p{bs}' if bs else ''}"
            try:
                rec, meta = read(path)
                os.remove(path)
                a = anatomy(rec, meta)
                if args.dump:
                    used = HEADER + EVENTS * int(min(ITEMS, rec[:, 6].max()))
                    np.savez_compressed(os.path.join(args.dump, f"row{idx}_{name}.npz"), rec=rec[:, :used],
                                        **{k: np.array(v) for k, v in meta.items()})
            except (OSError, ValueError) as e:
                print(f"{tag:<22}{name:<10}{tflops:>8.0f}  no trace: {e}", flush=True)
                continue
            print(f"{tag:<22}{name:<10}{tflops:>8.0f}" + "".join(f"{a[k]:>{w}.{p}f}" for k, _, w, p in COLS) +
                  f"   ({a['ctas']} CTAs, {a['sms']} SMs, {a['ghz']:.2f} GHz, {meta['block_m']}x{meta['block_n']}"
                  f"{' persistent' if meta['persistent'] else ''})", flush=True)
            fine_lines.append(f"{tag:<22}{name:<10}" + "".join(f"{a[k]:>{w}.{p}f}" for k, _, w, p in FINE))
            bucket_lines += [f"{tag} {name}"] + buckets(rec, meta) + plain_runs(rec, meta)
        del runs, keep
        torch.cuda.empty_cache()
    print(f"\nthe item boundary, us (trace_prefill.fine)\n{'row':<22}{'config':<10}" +
          "".join(f"{h:>{w}}" for _, h, w, _ in FINE))
    print("\n".join(fine_lines), flush=True)
    print("\nthe items by key tiles (trace_prefill.buckets)\n" + "\n".join(bucket_lines), flush=True)


if __name__ == "__main__":
    main()
