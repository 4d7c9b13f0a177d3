"""One ab_prefill row, ours, FA3's or cuDNN's (torch SDPA; uniform packed rows), run a few times
for a profiler (ncu) to pick one launch.
Usage: ncu ... -k regex:NAME --launch-skip 2 --launch-count 1 python3 bench/ncu_prefill.py
           --lib build-gpu/libflashserve_c.so --row 4 [--peer fa3] [--env VAR=VAL ...]
Prints the row and the median time of the runs (meaningless under ncu's replay; a sanity check
without it)."""
import argparse
import os
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import ab_prefill as ab  # noqa: E402
import bench_prefill as bp  # noqa: E402
import flashserve_ctypes as fsc  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--row", type=int, required=True, help="index into ab_prefill.ROWS (packed rows for --peer fa3)")
    ap.add_argument("--peer", choices=["ours", "fa3", "cudnn"], default="ours")
    ap.add_argument("--env", action="append", default=[], help="VAR=VAL overrides for our call")
    ap.add_argument("--reps", type=int, default=4)
    args = ap.parse_args()
    for kv in args.env:
        var, _, val = kv.partition("=")
        os.environ[var] = val
    row = ab.ROWS[args.row]
    gen = torch.Generator(device="cuda").manual_seed(5)
    runs, flops, label, keep = ab.setup_row(row, {None: fsc.load(args.lib)}, gen)
    fn = runs[None]
    if args.peer == "cudnn":
        q, k, v, o, lse, cu, cu_k, paged = keep[:8]
        lens = (cu[1:] - cu[:-1]).tolist()
        if paged is not None or len(set(lens)) != 1 or not torch.equal(cu, cu_k):
            sys.exit("cudnn: packed rows of equal lengths, no cached prefix")
        B, L, heads, dim = len(lens), lens[0], q.shape[1], q.shape[2]
        qs, ks, vs = (t.view(B, L, heads, dim).transpose(1, 2) for t in (q, k, v))
        fn = lambda: bp._sdpa(bp.SDPBackend.CUDNN_ATTENTION, qs, ks, vs, row[2])  # noqa: E731
    elif args.peer == "fa3":
        make, why = bp.fa3_fn()
        if make is None:
            sys.exit(f"fa3: {why}")
        q, k, v, o, lse, cu, cu_k, paged = keep[:8]
        if paged is not None:
            sys.exit("fa3: packed rows only")
        lens = (cu[1:] - cu[:-1]).tolist()
        klens = (cu_k[1:] - cu_k[:-1]).tolist()
        fn = make(q, k, v, cu, cu_k, max(lens), max(klens), row[2])
    times = [bp.time_fn(fn, reps=1, warm_s=0) for _ in range(args.reps)]
    t = sorted(times)[len(times) // 2]
    print(f"{args.peer} d{row[0]} {label} causal={row[2]} paged={row[3]}: {t * 1e3:.3f} ms, {flops / t / 1e12:.0f} TFLOP/s")


if __name__ == "__main__":
    main()
