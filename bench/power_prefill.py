"""SM clock and board power while prefill kernels run back to back (bench_prefill's shapes, ours
beside FA3 and cuDNN): each kernel is called for a few seconds, no L2 flush, while nvidia-smi
samples the GPU every 100 ms (power_decode's sampler). Per kernel: the median SM clock and power
under load, TFLOP/s over the stretch, the tensor pipe's share a cycle at that clock (TFLOP/s over
132 SMs x 4096 dense bf16 FLOP a cycle x the clock; an H100's and an H200's SM alike) and the
energy a FLOP (W / TFLOP/s = pJ a FLOP). The question it answers: where a row loses to a peer,
whether by fewer FLOPs a cycle or by a lower clock under the power cap. Reads clocks only,
never sets them.

Usage: python3 bench/power_prefill.py --lib build-gpu/libflashserve_c.so [--seconds S] [--rounds R]
       [--row D,B,L,C ...]  (D head dim, B sequences of L tokens, C 1 causal / 0 not)"""
import argparse
import sys
import time

import torch
from torch.nn.attention import SDPBackend

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import bench_prefill as bp  # noqa: E402
import flashserve_ctypes as fsc  # noqa: E402
from power_decode import sampled  # noqa: E402

ROWS = ["256,1,16384,1", "256,1,16384,0", "128,1,16384,1", "128,1,16384,0", "128,16,1024,1",
        "64,1,16384,1", "64,16,1024,1"]
SM_FLOP_A_CYCLE = 4096  # dense bf16 wgmma, per SM per cycle (sm_90)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--seconds", type=float, default=2.5)
    ap.add_argument("--rounds", type=int, default=2, help="each kernel's stretches a row, interleaved")
    ap.add_argument("--row", action="append", default=[], metavar="D,B,L,C")
    args = ap.parse_args()
    lib = fsc.load(args.lib)
    fa3, fa3_err = bp.fa3_fn()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    gen = torch.Generator(device="cuda").manual_seed(5)
    print(f"device {torch.cuda.get_device_name()} ({sms} SMs); FA3: {'yes' if fa3 else fa3_err}; no L2 flush; "
          f"{args.seconds} s a stretch, {args.rounds} rounds")
    print(f"{'row':>16} {'kernel':>6} {'MHz':>6} {'W':>5} {'TFLOP/s':>8} {'tensor/cyc':>10} {'pJ/FLOP':>8}")
    for spec in args.row or ROWS:
        dim, b, L, causal = (int(x) for x in spec.split(","))
        heads = 2048 // dim
        lens = [L] * b
        total = b * L
        q = torch.randn(total, heads, dim, dtype=torch.bfloat16, device="cuda", generator=gen)
        k, v = torch.randn_like(q), torch.randn_like(q)
        o = torch.empty_like(q)
        lse = torch.empty(total, heads, dtype=torch.float32, device="cuda")
        cu = torch.tensor([i * L for i in range(b + 1)], dtype=torch.int32, device="cuda")
        flops = 4 * b * L * L * heads * dim / (2 if causal else 1)
        ours, _ = bp.ours_fn(lib, q, k, v, o, lse, cu, lens, heads, dim, bool(causal), fsc.FS_BFLOAT16)
        kernels = [("ours", ours)]
        if fa3 is not None:
            kernels.append(("fa3", fa3(q, k, v, cu, cu, L, L, bool(causal))))
        qs, ks, vs = (t.view(b, L, heads, dim).transpose(1, 2) for t in (q, k, v))
        kernels.append(("cudnn", lambda: bp._sdpa(SDPBackend.CUDNN_ATTENTION, qs, ks, vs, bool(causal))))
        label = f"d{dim} {b}x{L // 1024}k{' c' if causal else ''}"
        res = {name: [] for name, _ in kernels}
        for _ in range(args.rounds):
            for name, fn in kernels:
                try:
                    fn()
                    torch.cuda.synchronize()
                except Exception as e:  # noqa: BLE001 - a peer that does not run: say so
                    print(f"{label:>16} {name:>6} failed: {str(e).splitlines()[0][:80]}")
                    res[name] = None
                    continue
                if res[name] is None:
                    continue
                calls = [0]

                def run_for(seconds, fn=fn, calls=calls):
                    end = time.time() + seconds
                    while time.time() < end:
                        for _ in range(4):
                            fn()
                        torch.cuda.synchronize()
                        calls[0] += 4
                mhz, _, watts, secs = sampled(run_for, args.seconds)
                tflops = flops * calls[0] / secs / 1e12
                res[name].append((mhz, watts, tflops))
        for name, vals in res.items():
            if not vals:
                continue
            for mhz, watts, tflops in vals:
                share = tflops * 1e12 / (sms * SM_FLOP_A_CYCLE * mhz * 1e6)
                print(f"{label:>16} {name:>6} {mhz:6.0f} {watts:5.0f} {tflops:8.1f} {share:10.3f} {watts / tflops:8.3f}",
                      flush=True)
        del q, k, v, o, kernels, qs, ks, vs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
