"""Anatomy of the split kernel on one shape, from a build configured with
-DFLASHSERVE_DECODE_EXPERIMENTS=ON -DFLASHSERVE_DECODE_TRACE=ON (decode/cuda/decode_experiments.cuh: each
CTA stamps the global timer at its start, when its first stages' copies are issued, when its
first tile has landed, after its last tile, and at its end). Prints, over the CTAs of one eager
call: start skew, issue (start -> first copies issued), ramp (-> first tile), loop, epilogue, end
spread, and the kernel's span; then the K/V bytes over the span.

Usage: python3 bench/trace_decode.py --lib build-var/libflashserve_c.so [--shape 1,32768 ...] [--fp8 e4m3]"""
import argparse
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import bench_decode as bd  # noqa: E402
import flashserve_ctypes as fsc  # noqa: E402


def shape_label(batch, ctx, pages):
    """(batch,ctx), and the FP8 pages' format where there are some."""
    return f"({batch},{ctx})" + (f" {pages}" if pages else "")


def read_trace(ws, ctas):
    """The trace words of the last call: [ctas, 6] (SM, start, copies issued, first tile, loop end,
    end)."""
    return ws[-48 * ctas:].view(torch.int64).view(ctas, 6).cpu()


def stats(x):
    x = x.double()
    return f"min {x.min().item():7.2f} avg {x.mean().item():7.2f} max {x.max().item():7.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--shape", action="append", default=[], help="batch,context (repeatable)")
    ap.add_argument("--ctas-per-sm", type=int, default=2)
    ap.add_argument("--timeline", action="store_true", help="also kernel times of graph-replayed calls (profiler)")
    ap.add_argument("--dump", metavar="DIR", help="also write each CTA's stamps of 3 calls as CSV (one file a shape)")
    ap.add_argument("--fp8", choices=["e4m3", "e5m2"], help="each shape traced again over FP8 pages of the same keys")
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape] or [(1, 4096), (1, 32768), (8, 8192)]
    runs = [(s, f) for s in shapes for f in ([None, args.fp8] if args.fp8 else [None])]  # (shape, FP8 pages or None)
    lib = fsc.load(args.lib)
    sms = fsc.ctypes.c_int32()
    fsc.check(lib, lib.fs_cuda_sm_count(0, fsc.ctypes.byref(sms)), "sm count")
    gen = torch.Generator(device="cuda").manual_seed(5)
    for (batch, ctx), pages in runs:
        case = bd.Case([ctx] * batch, 16, torch.bfloat16, 1, gen)
        fp8 = bd.fp8_pages(case, pages) if pages else None
        # Room for the trace, 6 words a CTA, for the most splits the planner gives (64; one row
        # block: group 4 × q_len 1); the kernel writes it at the end of the workspace.
        fns, keep, plan = bd.ours(lib, case, args.ctas_per_sm * sms.value, extra_ws=48 * 64 * bd.KV_HEADS * batch,
                                  fp8=fp8)
        ctas = max(1, plan.num_splits) * bd.KV_HEADS * batch
        kv_bytes = case.kv_bytes // 2 if fp8 else case.kv_bytes
        ws = keep[0]
        for _ in range(3):
            fns[0]()
        torch.cuda.synchronize()
        t = read_trace(ws, ctas)
        if args.dump:
            dump(args.dump, batch, f"{ctx}{'_' + pages if fp8 else ''}", plan.num_splits, fns[0], ws, ctas, t)
        if (t[:, 1] == 0).any():
            print(f"{shape_label(batch, ctx, pages)}: no trace (not a trace build)")
            continue
        t0 = t[:, 1].min()
        start, issued, first, loop, end = [(t[:, k] - t0).double() / 1e3 for k in (1, 2, 3, 4, 5)]  # us
        span = end.max().item()
        print(f"{shape_label(batch, ctx, pages)}: {plan.num_splits} splits, {ctas} CTAs on "
              f"{len(set(t[:, 0].tolist()))} SMs; span {span:.2f} us = {kv_bytes / span / 1e3:.0f} GB/s of K/V")
        print(f"  start     {stats(start)} us")
        print(f"  issue     {stats(issued - start)} us (start -> first stages' copies issued)")
        print(f"  ramp      {stats(first - issued)} us (-> first tile landed)")
        print(f"  loop      {stats(loop - first)} us")
        print(f"  epilogue  {stats(end - loop)} us")
        print(f"  end       {stats(end)} us")
        del case, fns, keep, fp8
    if args.timeline:
        for (batch, ctx), pages in runs:
            timeline(lib, sms.value * args.ctas_per_sm, batch, ctx, gen, pages)


def dump(folder, batch, ctx, splits, call, ws, ctas, first):
    """CSV of every CTA's SM and stamps (us from the call's first start) over 3 calls, to see
    whether the slow CTAs are the same SMs, splits or heads from call to call."""
    import os
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"trace_{batch}x{ctx}.csv"), "w") as f:
        f.write("call,cta,b,kv_head,split,sm,start,issued,first,loop,end\n")
        t = first
        for c in range(3):
            if c > 0:
                call()
                torch.cuda.synchronize()
                t = read_trace(ws, ctas)
            t0 = t[:, 1].min()
            for i in range(ctas):
                split, unit = i % splits, i // splits
                us = [(t[i, k] - t0).item() / 1e3 for k in (1, 2, 3, 4, 5)]
                f.write(f"{c},{i},{unit // bd.KV_HEADS},{unit % bd.KV_HEADS},{split},{t[i, 0].item()},"
                        + ",".join(f"{u:.3f}" for u in us) + "\n")


def timeline(lib, workers, batch, ctx, gen, pages=None):
    """Kernel start/end times of 8 back-to-back calls replayed from a CUDA graph (profiler):
    split kernel, merge end after split end, gap to the next call's split kernel; pages: FP8
    pages of the same keys (e4m3, e5m2) instead of bf16."""
    from torch.profiler import ProfilerActivity, profile
    case = bd.Case([ctx] * batch, 16, torch.bfloat16, bd.rotation_copies([ctx] * batch), gen)
    fns, keep, plan = bd.ours(lib, case, workers, fp8=bd.fp8_pages(case, pages) if pages else None)
    calls = [fns[i % len(fns)] for i in range(max(8, len(fns)))]
    for f in calls:
        f()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for f in calls:
            f()
    g.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        g.replay()
        torch.cuda.synchronize()
    ev = sorted([(e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                 if e.device_type.name == "CUDA" and ("decode_split" in e.name or "merge_kernel" in e.name)])
    splits = [e for e in ev if "decode_split" in e[2]]
    merges = [e for e in ev if "merge_kernel" in e[2]]
    if len(splits) < 2:
        print(f"{shape_label(batch, ctx, pages)} timeline: no kernel events from the graph ({len(ev)})")
        return
    per_call = (splits[-1][0] - splits[0][0]) / (len(splits) - 1)
    sd = sum(e[1] - e[0] for e in splits) / len(splits)
    line = f"{shape_label(batch, ctx, pages)} timeline over {len(splits)} calls: {per_call:.2f} us a call; split kernel {sd:.2f} us"
    if len(merges) == len(splits):
        tail = sum(m[1] - s[1] for s, m in zip(splits, merges)) / len(splits)
        gap = sum(splits[i + 1][0] - merges[i][1] for i in range(len(splits) - 1)) / (len(splits) - 1)
        line += f", merge ends {tail:.2f} us after it, next split starts {gap:.2f} us after that"
    print(line)


if __name__ == "__main__":
    main()
