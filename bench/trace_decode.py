"""Anatomy of the split kernel on one shape, from a build with -DFLASHSERVE_DECODE_TRACE (each
CTA stamps the global timer at its start, when its first tile has landed, after its last tile,
and at its end). Prints, over the CTAs of one eager call: start skew, ramp (start -> first tile),
loop, epilogue, end spread, and the kernel's span; then the K/V bytes over the span.

Usage: python3 bench/trace_decode.py --lib build-var/libflashserve_c.so [--shape 1,32768 ...]"""
import argparse
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import bench_decode as bd  # noqa: E402
import flashserve_ctypes as fsc  # noqa: E402


def stats(x):
    x = x.double()
    return f"min {x.min().item():7.2f} avg {x.mean().item():7.2f} max {x.max().item():7.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--shape", action="append", default=[], help="batch,context (repeatable)")
    ap.add_argument("--ctas-per-sm", type=int, default=2)
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape] or [(1, 4096), (1, 32768), (8, 8192)]
    lib = fsc.load(args.lib)
    sms = fsc.ctypes.c_int32()
    fsc.check(lib, lib.fs_cuda_sm_count(0, fsc.ctypes.byref(sms)), "sm count")
    gen = torch.Generator(device="cuda").manual_seed(5)
    for batch, ctx in shapes:
        case = bd.Case([ctx] * batch, 16, torch.bfloat16, 1, gen)
        # Room for the trace: 5 words a CTA (row blocks: group 4 × q_len 1 fits one).
        probe_fns, _, plan = bd.ours(lib, case, args.ctas_per_sm * sms.value)
        ctas = max(1, plan.num_splits) * bd.KV_HEADS * batch
        fns, keep, plan = bd.ours(lib, case, args.ctas_per_sm * sms.value, extra_ws=40 * ctas)
        ws = keep[0]
        for _ in range(3):
            fns[0]()
        torch.cuda.synchronize()
        t = ws[-40 * ctas:].view(torch.int64).view(ctas, 5).cpu()
        if plan.num_splits <= 1 or (t[:, 1] == 0).any():
            print(f"({batch},{ctx}): no trace (one split, or not a trace build)")
            continue
        t0 = t[:, 1].min()
        start, first, loop, end = [(t[:, k] - t0).double() / 1e3 for k in (1, 2, 3, 4)]  # us
        span = end.max().item()
        print(f"({batch},{ctx}): {plan.num_splits} splits, {ctas} CTAs on {len(set(t[:, 0].tolist()))} SMs; "
              f"span {span:.2f} us = {case.kv_bytes / span / 1e6:.0f} GB/s of K/V")
        print(f"  start     {stats(start)} us")
        print(f"  ramp      {stats(first - start)} us (start -> first tile landed)")
        print(f"  loop      {stats(loop - first)} us")
        print(f"  epilogue  {stats(end - loop)} us")
        print(f"  end       {stats(end)} us")
        del case, fns, keep, probe_fns


if __name__ == "__main__":
    main()
