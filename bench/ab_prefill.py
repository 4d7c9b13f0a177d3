"""Same-run A/B of our prefill's settings (environment overrides read at every call): each row
is timed under each configuration in turn, twice (the second pass shows the spread), L2
flushed before every call as in bench_prefill.py. No peers: the ratios between configurations
are the point; bench_prefill.py gives them against the peers. On the first pass each
configuration's output is compared with the default's (max |difference|, "(!)" past 0.05 or on
NaN): an A/B library that is fast because it is wrong shows. --interleave times each pass over
all rows in turn, so that rows (e.g. paged against packed) compare pass by pass. A configuration
whose overrides hold GRAPH=1 (not passed to the library) times its call captured into a CUDA graph
(torch.cuda.graph, the overrides read at the capture) and replayed: what a mixed step's graph
runs, without the dynamic walk's counters.
Usage: python3 bench/ab_prefill.py --lib build-gpu/libflashserve_c.so --config NAME=VAR=VAL[,VAR=VAL] ..."""
import argparse
import os
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import bench_prefill as bp  # noqa: E402
import flashserve_ctypes as fsc  # noqa: E402

ROWS = [  # (head_dim, lens, causal, paged block size or 0[, cached prefix: keys before the queries])
    (128, [1024] * 16, False, 0), (128, [1024] * 16, True, 0), (128, [4096] * 4, False, 0),
    (128, [4096] * 4, True, 0), (128, [16384], False, 0), (128, [16384], True, 0),
    (128, [4096] * 4, True, 16), (64, [1024] * 16, False, 0), (64, [16384], True, 0),
    (256, [16384], False, 0), (256, [16384], True, 0),
    # 11-: chunked prefill (2k over 30k) paged 16 and 64, packed; 4×4k causal paged 64; d 64 rows
    (128, [2048], True, 16, 30720), (128, [2048], True, 64, 30720), (128, [2048], True, 0, 30720),
    (128, [4096] * 4, True, 64), (64, [4096] * 4, False, 0), (64, [4096] * 4, True, 0),
    (64, [16384], False, 0), (64, [1024] * 16, True, 0), (64, [4096] * 4, True, 16),
    # 20-: d 128 8×2k, non-causal and causal (between 16×1k and 4×4k: where the wide key tile starts to pay)
    (128, [2048] * 8, False, 0), (128, [2048] * 8, True, 0),
    # 22-: d 128 paged 16 beside packed rows 2 and 5 (the rows where paged takes the wide key tile)
    (128, [4096] * 4, False, 16), (128, [16384], True, 16),
    # 24-: varlen batches, one 8k prompt among 63 short ones (64-511 tokens, seeded): d 128 causal
    # packed and in 16-token pages, non-causal packed, d 64 causal; 32 prompts of 17-4000 tokens
    # causal in 16-token pages (a server's prefill step; the grid order's items mostly do not exist)
    (128, "skew", True, 0), (128, "skew", True, 16), (128, "skew", False, 0), (64, "skew", True, 0),
    (128, "mix", True, 16),
    # 29-: FP8 e4m3 pages (issue 25; a sixth field: the pages' dtype): 2k over 30k and 4×4k causal,
    # 16-token pages
    (128, [2048], True, 16, 30720, "e4m3"), (128, [4096] * 4, True, 16, 0, "e4m3"),
    # 31: e5m2 pages (converted by byte placement, no F2FP), 2k over 30k
    (128, [2048], True, 16, 30720, "e5m2"),
    # 32-: d 64 16×1k in 16-token pages, causal and not (where v3 or ws is the paged default at d 64)
    (64, [1024] * 16, True, 16), (64, [1024] * 16, False, 16),
    # 34-: 200 prompts of 64-511 tokens, d 128 packed, causal and not (more sequences than the
    # 128-key instance caches, PrefillWsTraits::kSeqCache)
    (128, "many", True, 0), (128, "many", False, 0),
    # 36-: pages of 128 tokens (TMA page boxes since session 45): d 128 4×4k,
    # causal and not, 1×16k causal, 2k over 30k; d 64 4×4k causal; d 128 4×4k in 256-token pages
    (128, [4096] * 4, False, 128), (128, [4096] * 4, True, 128), (128, [16384], True, 128),
    (128, [2048], True, 128, 30720), (64, [4096] * 4, True, 128), (128, [4096] * 4, False, 256),
    # 42-: pages of 128 tokens, short rows (d 128 16×1k causal) and d 64's 192-row tile (4×4k)
    (128, [1024] * 16, True, 128), (64, [4096] * 4, False, 128),
    # 44-: d 64 non-causal short rows (where 192-row tiles pad the most: d 64's row tile rule), 8×2k,
    # 32×512, 64×300, and the skewed batch
    (64, [2048] * 8, False, 0), (64, [512] * 32, False, 0), (64, [300] * 64, False, 0), (64, "skew", False, 0),
    # 48-: d 128 2×8k (the key tile rule's 8k keys a sequence: 176 keys, session 46)
    (128, [8192] * 2, False, 0), (128, [8192] * 2, True, 0),
]


def row_lens(lens):
    """A row's q lengths: a list, or a seeded varlen batch by name."""
    if lens == "skew":
        g = torch.Generator().manual_seed(4)
        return [8192] + [int(x) for x in torch.randint(64, 512, (63,), generator=g)]
    if lens == "mix":
        g = torch.Generator().manual_seed(6)
        return [int(x) for x in torch.randint(17, 4001, (32,), generator=g)]
    if lens == "many":  # more prompts than d 128's packed 128-key instance caches (158)
        g = torch.Generator().manual_seed(8)
        return [int(x) for x in torch.randint(64, 512, (200,), generator=g)]
    return lens


def shape_name(lens):
    """A uniform batch's shape: 16x1k, or 32x512 below 1k (a named batch keeps its name)."""
    if isinstance(lens, str):
        return lens
    return f"{len(lens)}x{lens[0] // 1024}k" if lens[0] % 1024 == 0 else f"{len(lens)}x{lens[0]}"


def row_name(row):
    """A row's name for --only: d<dim>-<shape>[+<prefix>k][-c][-p<block size>][-<fp8 dtype>], e.g.
    d64-16x1k-c, d128-4x4k-c-p16, d128-1x2k+30k-c-p16-e4m3, d128-skew-c."""
    dim, lens, causal, bs = row[:4]
    prefix = row[4] if len(row) > 4 else 0
    fp8 = row[5] if len(row) > 5 else None
    return (f"d{dim}-{shape_name(lens)}" + (f"+{prefix // 1024}k" if prefix else "") + ("-c" if causal else "") +
            (f"-p{bs}" if bs else "") + (f"-{fp8}" if fp8 else ""))


def pick_rows(spec):
    """--only's rows: comma-separated indices into ROWS or row names (row_name), as (index, row)."""
    if not spec:
        return list(enumerate(ROWS))
    names = {row_name(r): i for i, r in enumerate(ROWS)}
    picked = []
    for tok in spec.split(","):
        if tok.isdigit():
            picked.append(int(tok))
        elif tok in names:
            picked.append(names[tok])
        else:
            sys.exit(f"--only: no row {tok!r}; rows: " + ", ".join(f"{i} {n}" for n, i in names.items()))
    return [(i, ROWS[i]) for i in picked]


def setup_row(row, libs, gen):
    """A row's inputs (random, from gen) and our call over them for each library in libs: (runs by
    the libs' keys, FLOPs, label, the tensors to keep alive)."""
    dim, lens, causal, bs = row[:4]
    name = lens if isinstance(lens, str) else None
    lens = row_lens(lens)
    prefix = row[4] if len(row) > 4 else 0
    fp8 = row[5] if len(row) > 5 else None
    heads, total = 2048 // dim, sum(lens)
    klens = [l + prefix for l in lens]
    q = torch.randn(total, heads, dim, dtype=torch.bfloat16, device="cuda", generator=gen)
    k = torch.randn(sum(klens), heads, dim, dtype=torch.bfloat16, device="cuda", generator=gen)
    v, o = torch.randn_like(k), torch.empty_like(q)
    lse = torch.empty(total, heads, dtype=torch.float32, device="cuda")
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + list(torch.tensor(klens).cumsum(0)), dtype=torch.int32, device="cuda")
    paged, scales, pool8 = None, None, None
    if bs:
        kp, vp, table, sl = bp.to_pages(k, v, klens, heads, dim, bs, gen)
        paged = (kp, vp, table, sl, bs)
        if fp8:  # the same pages' codes, a scale a kv head (bench_prefill's FP8 column)
            k8, v8, ks8, vs8, fs8, pool8 = bp.fp8_pool(kp, vp, fp8)
            paged, scales = (k8, v8, table, sl, bs), (fs8, ks8, vs8)
    runs = {key: bp.ours_fn(lb, q, k, v, o, lse, cu, klens, heads, dim, causal, fsc.FS_BFLOAT16, paged=paged,
                            cu_k=cu_k, fp8=scales)[0] for key, lb in libs.items()}
    # Causal is bottom-right: query i of n sees the prefix and i + 1 of its own keys.
    pairs = sum(l * (l + 1) // 2 + l * prefix if causal else l * (l + prefix) for l in lens)
    label = name or shape_name(lens) + (f"+{prefix // 1024}k" if prefix else "") + (fp8 or "")
    return runs, 4 * pairs * heads * dim, label, (q, k, v, o, lse, cu, cu_k, paged, scales, pool8)


def time_pass(row, runs, flops, label, keep, configs, pas):
    """One pass of a row: its time under each configuration in turn, printed as a line (on the first
    pass each configuration's output against the default's)."""
    dim, lens, causal, bs = row[:4]
    vals, diffs, first = [], [], None
    for name, env, key in configs:
        graph = env.get("GRAPH") == "1"
        env = {var: val for var, val in env.items() if var != "GRAPH"}
        os.environ.update(env)
        try:
            fn = runs[key]
            if graph:
                fn()  # (an eager call first: the library's first-call setup stays out of the capture)
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    fn()
                fn = g.replay
            vals.append(f"{flops / bp.time_fn(fn) / 1e12:>12.0f}")
            if pas == 0:  # the outputs against the default's: a variant that is fast because wrong shows
                out = keep[3].float()
                if first is None:
                    first = out
                else:
                    d = (out - first).abs().max().item()
                    diffs.append(f"{name} {d:.4f}" + ("" if d <= 0.05 else " (!)"))  # NaN: max is NaN
        except Exception as e:  # noqa: BLE001
            vals.append(f"{'err':>12}")
            print("  ", str(e).splitlines()[0][:120])
        for var in env:
            del os.environ[var]
    print(f"{dim:>4} {label:<8}{str(causal):>7}{bs:>6}" + "".join(vals) + ("" if pas == 0 else "  (again)"),
          flush=True)
    if diffs:
        print("      max |o - default's o|: " + ", ".join(diffs), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib")
    ap.add_argument("--config", action="append", default=[],
                    help="NAME=VAR=VAL[,VAR=VAL], or NAME=@PATH[,VAR=VAL...]: another build of the library (e.g. "
                         "the last commit's), with the overrides given; 'default' = this --lib, no override")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--only", help="comma-separated indices into ROWS or row names (row_name: d64-16x1k-c, ...)")
    ap.add_argument("--interleave", action="store_true",
                    help="each pass over all rows in turn (rows compared pass by pass, e.g. paged against packed; "
                         "every row's inputs kept at once) instead of a row's passes together")
    args = ap.parse_args()
    libs = {None: fsc.load(args.lib)}
    configs = [("default", {}, None)]  # (name, environment, library path or None)
    for c in args.config:
        name, _, rest = c.partition("=")
        if rest.startswith("@"):
            path, *env = rest[1:].split(",")
            if path not in libs:
                libs[path] = fsc.load(path)
            configs.append((name, dict(kv.split("=", 1) for kv in env), path))
        else:
            configs.append((name, dict(kv.split("=", 1) for kv in rest.split(",")), None))
    gen = torch.Generator(device="cuda").manual_seed(5)
    print(f"{'d':>4} {'shape':<8}{'causal':>7}{'paged':>6}" + "".join(f"{n:>12}" for n, _, _ in configs), flush=True)
    rows = [r for _, r in pick_rows(args.only)]
    if args.interleave:  # every row's inputs at once, and each pass over all rows in turn
        made = [(row, *setup_row(row, libs, gen)) for row in rows]
        for pas in range(args.passes):
            for row, runs, flops, label, keep in made:
                time_pass(row, runs, flops, label, keep, configs, pas)
        return
    for row in rows:
        runs, flops, label, keep = setup_row(row, libs, gen)
        for pas in range(args.passes):
            time_pass(row, runs, flops, label, keep, configs, pas)
        del runs, keep
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
