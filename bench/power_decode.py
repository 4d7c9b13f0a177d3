"""SM clock and board power while decode kernels run back to back (bench_decode's shapes and
peers): each kernel is graph-replayed for a few seconds while nvidia-smi samples the GPU every
100 ms; prints the median SM clock, memory clock and power of the samples taken under load, and
the kernel's bandwidth over that stretch. Reads clocks only, never sets them.

Usage: python3 bench/power_decode.py --lib build-gpu/libflashserve_c.so [--variant NAME=LIB ...]
       [--shape B,CTX ...] [--seconds S]"""
import argparse
import statistics
import subprocess
import sys
import time

import torch
from torch.nn.attention import SDPBackend

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import bench_decode as bd  # noqa: E402
import flashserve_ctypes as fsc  # noqa: E402


def sampled(run_for, seconds):
    """Runs run_for(seconds) under nvidia-smi sampling; returns the (SM MHz, memory MHz, W) medians
    and the seconds run_for took."""
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw", "--format=csv,noheader,nounits",
                            "-lms", "100"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    t0 = time.time()
    run_for(seconds)
    t1 = time.time()
    time.sleep(0.15)
    smi.terminate()
    out, _ = smi.communicate()
    rows = []
    for line in out.strip().splitlines():
        try:
            rows.append([float(x) for x in line.split(",")])
        except ValueError:
            continue
    # Drop the first and last 10% of the samples (the idle lead-in and tail); the median covers
    # the odd idle sample left.
    n = len(rows)
    keep = rows[max(0, n // 10):n - max(1, n // 10)] if n > 10 else rows
    if not keep:
        return float("nan"), float("nan"), float("nan"), t1 - t0
    return (statistics.median(r[0] for r in keep), statistics.median(r[1] for r in keep),
            statistics.median(r[2] for r in keep), t1 - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=LIB")
    ap.add_argument("--shape", action="append", default=[], metavar="B,CTX")
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shape] or [(64, 8192), (1, 32768)]
    libs = [("ours", fsc.load(args.lib))] + [(v.split("=", 1)[0], fsc.load(v.split("=", 1)[1])) for v in args.variant]
    gen = torch.Generator(device="cuda").manual_seed(0)
    print("shape, kernel: SM MHz, mem MHz, W (medians under load), TB/s over the stretch")
    for b, ctx in shapes:
        lens = [ctx] * b
        case = bd.Case(lens, 16, torch.bfloat16, bd.rotation_copies(lens), gen)
        runs = []
        keep = []
        for name, lib in libs:
            fns, k, _ = bd.ours(lib, case, 0)  # 0: the kernel's launch shape on this device
            keep.append(k)
            runs.append((name, fns))
        runs.append(("cudnn", bd.sdpa_fns(case, SDPBackend.CUDNN_ATTENTION)))
        for name, fns in runs:
            g, calls = bd.capture_graph(fns)
            done = [0]

            def run_for(seconds, g=g, done=done):
                end = time.time() + seconds
                while time.time() < end:
                    for _ in range(5):
                        g.replay()
                    torch.cuda.synchronize()
                    done[0] += 5
            sm, mem, w, secs = sampled(run_for, args.seconds)
            tbps = case.kv_bytes * calls * done[0] / secs / 1e12
            print(f"({b},{ctx // 1024}k) {name:>8}: {sm:6.0f} MHz {mem:6.0f} MHz {w:6.0f} W  {tbps:5.2f} TB/s", flush=True)
            del g
        del case, runs, keep
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
