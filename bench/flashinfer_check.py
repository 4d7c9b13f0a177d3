"""FlashInfer's fa3 ragged prefill on the GPU machine, checked before bench_prefill.py --flashinfer
uses it: JIT-builds it for each head dim (one module per head dim and dtype, holding every mask
mode: causal is a run-time argument), runs a small varlen batch causal and not, MHA and GQA,
against torch SDPA in float32, and prints each JIT's time and the max differences. The modules
stay in the JIT cache (/tmp/fi-cache, see scripts/gpu_peers.sh install) for later calls on the
same warm machine.

Usage: source scripts/gpu_peers.sh install && python3 bench/flashinfer_check.py
         [--dtypes bf16[,f16]] [--dims 64,128,256] [--parallel]
--parallel builds all the modules asked for in one ninja run (the machine's cores over all of
them; only the total time is known) before the checks."""
import argparse
import os
import shutil
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashinfer_shim  # noqa: E402,F401  (before flashinfer)
import flashinfer  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
TOL = {torch.bfloat16: 3e-2, torch.float16: 5e-3}  # max |out - ref| on outputs of size ~0.1-1


def reference(q, k, v, lens_q, lens_k, causal):
    """SDPA in float32 per sequence; causal aligned to the end of the keys (FlashInfer's rule)."""
    out, sq, sk = [], 0, 0
    group = q.shape[1] // k.shape[1]
    for lq, lk in zip(lens_q, lens_k):
        qb = q[sq:sq + lq].float().transpose(0, 1)
        kb = k[sk:sk + lk].float().repeat_interleave(group, dim=1).transpose(0, 1)
        vb = v[sk:sk + lk].float().repeat_interleave(group, dim=1).transpose(0, 1)
        mask = None
        if causal:
            i = torch.arange(lq, device=q.device)[:, None]
            j = torch.arange(lk, device=q.device)[None, :]
            mask = j <= i + (lk - lq)
        out.append(F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask).transpose(0, 1))
        sq, sk = sq + lq, sk + lk
    return torch.cat(out)


def spec_for(dtype, dim):
    from flashinfer.jit.attention.modules import gen_batch_prefill_module
    return gen_batch_prefill_module("fa3", dtype, dtype, dtype, torch.int32, dim, dim, 0, False, False, False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="bf16")
    ap.add_argument("--dims", default="64,128,256")
    ap.add_argument("--parallel", action="store_true")
    args = ap.parse_args()
    dtypes = [DTYPES[d] for d in args.dtypes.split(",")]
    dims = [int(d) for d in args.dims.split(",")]
    from flashinfer.jit import env as jit_env
    print(f"flashinfer {flashinfer.__version__} ({os.path.dirname(flashinfer.__file__)}), torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}; JIT cache {jit_env.FLASHINFER_WORKSPACE_DIR}; "
          f"nvcc {os.environ.get('CUDA_HOME')}/bin/nvcc; ninja {shutil.which('ninja')}; "
          f"numpy {'present' if 'numpy' in sys.modules else 'absent (stubbed for the import)'}", flush=True)
    if args.parallel:
        from flashinfer.jit.core import build_jit_specs
        specs = [spec_for(dt, d) for dt in dtypes for d in dims]
        todo = [s for s in specs if not s.is_compiled]
        t = time.time()
        build_jit_specs(specs)
        print(f"JIT (one ninja run, {len(todo)} of {len(specs)} modules to build): {time.time() - t:.0f} s", flush=True)

    gen = torch.Generator(device="cuda").manual_seed(0)
    ws = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
    # One sequence of one token, partial tiles, and one chunk over a longer prefix (q 64 over k 200).
    lens_q, lens_k = [1, 37, 128, 300, 64], [1, 37, 128, 300, 200]
    cu_q = torch.tensor([0] + lens_q, dtype=torch.int32, device="cuda").cumsum(0, dtype=torch.int32)
    cu_k = torch.tensor([0] + lens_k, dtype=torch.int32, device="cuda").cumsum(0, dtype=torch.int32)
    failed, passed = 0, 0
    for dt in dtypes:
        for dim in dims:
            w = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(ws, kv_layout="NHD", backend="fa3")
            t = time.time()
            try:
                w.plan(cu_q, cu_k, 4, 4, dim, causal=False, q_data_type=dt)  # builds (or loads) the module
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - say which one and go on
                print(f"{str(dt)[6:]} d{dim}: JIT/plan failed: {str(e)[:2000]}", flush=True)
                failed += 1
                continue
            line = f"{str(dt)[6:]} d{dim}: JIT+plan {time.time() - t:.1f} s;"
            for hq, hk in ((4, 4), (8, 2)):
                q = torch.randn(sum(lens_q), hq, dim, generator=gen, device="cuda").to(dt)
                k = torch.randn(sum(lens_k), hk, dim, generator=gen, device="cuda").to(dt)
                v = torch.randn(sum(lens_k), hk, dim, generator=gen, device="cuda").to(dt)
                for causal in (False, True):
                    w.plan(cu_q, cu_k, hq, hk, dim, causal=causal, q_data_type=dt)
                    o = w.run(q, k, v)
                    diff = (o.float() - reference(q, k, v, lens_q, lens_k, causal)).abs().max().item()
                    ok = diff <= TOL[dt]
                    passed, failed = passed + ok, failed + (not ok)
                    line += f" {hq}/{hk}{' causal' if causal else ''} {diff:.2e}{'' if ok else ' FAIL'};"
            print(line, flush=True)
    print(f"flashinfer_check: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
