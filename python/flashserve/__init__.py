"""flashserve: the attention backend from Python, over the C ABI (ctypes).

Takes numpy arrays (CPU) or torch tensors (CPU or CUDA; a call runs on its tensors' device, on
that device's current stream), checks shapes, dtypes and devices before every call, and raises
ValueError / TypeError with a message that names the argument; errors from the library raise
FlashserveError. On CUDA the lengths and block tables are checked on host copies too, unless a
call passes check=False.

    import flashserve
    o = flashserve.varlen_prefill(q, k, v, cu_seqlens_q, cu_seqlens_k, causal=True)
    o = flashserve.decode(q, k_cache, v_cache, block_table, seq_lens)
    o, lse = flashserve.merge_states(o_a, lse_a, o_b, lse_b)

Layouts are the C ABI's: q, k, v packed [tokens, heads, head_dim]; k_cache and v_cache
[num_blocks, kv_heads, block_size, head_dim], any strides with head_dim contiguous and the same
for both (KVCache.layer gives views of one [num_blocks, 2, kv_heads, block_size, head_dim]
pool); decode q [batch, q_len, heads, head_dim].
"""
import math

import numpy as np

from . import _capi

__all__ = ["FlashserveError", "varlen_prefill", "paged_prefill", "decode", "merge_states", "BlockManager", "KVCache",
           "OutOfBlocks"]


class FlashserveError(RuntimeError):
    """A status the library returned (the message is the library's)."""


_lib = None


def _library():
    global _lib
    if _lib is None:
        _lib = _capi.load()
    return _lib


def _check(rc, what):
    if rc != 0:
        raise FlashserveError(f"{what}: {_library().fs_last_error().decode()}")


# ---- tensors: numpy or torch ------------------------------------------------------------------

def _is_torch(x):
    return type(x).__module__.startswith("torch")


class _T:
    """What the C ABI needs of one array: pointer, shape, element strides, dtype, device."""

    def __init__(self, x, name):
        self.x, self.name = x, name
        if _is_torch(x):
            import torch
            self.shape = tuple(x.shape)
            self.strides = tuple(x.stride())
            self.ptr = x.data_ptr()
            self.device = _capi.FS_DEVICE_CUDA if x.is_cuda else _capi.FS_DEVICE_CPU
            self.device_index = x.device.index if x.is_cuda else -1
            types = {torch.float32: _capi.FS_FLOAT32, torch.float16: _capi.FS_FLOAT16,
                     torch.bfloat16: _capi.FS_BFLOAT16, torch.int32: "int32",
                     torch.uint8: "uint8"}  # uint8: FP8 codes, with kv_dtype= naming the format
            for name, code in (("float8_e4m3fn", _capi.FS_FP8_E4M3), ("float8_e5m2", _capi.FS_FP8_E5M2)):
                if hasattr(torch, name):  # torch >= 2.1
                    types[getattr(torch, name)] = code
            self.dtype = types.get(x.dtype)
            self.dtype_name = str(x.dtype)
        elif isinstance(x, np.ndarray):
            self.shape = x.shape
            self.strides = tuple(s // x.itemsize for s in x.strides)
            self.ptr = x.ctypes.data
            self.device, self.device_index = _capi.FS_DEVICE_CPU, -1
            # uint8: FP8 codes (numpy has no FP8 type), with kv_dtype= naming the format
            self.dtype = {np.dtype(np.float32): _capi.FS_FLOAT32, np.dtype(np.float16): _capi.FS_FLOAT16,
                          np.dtype(np.int32): "int32", np.dtype(np.uint8): "uint8"}.get(x.dtype)
            self.dtype_name = str(x.dtype)
        else:
            raise TypeError(f"{name}: expected a numpy array or a torch tensor, got {type(x).__name__}")

    def need(self, ndim=None, dtype=None, last_contiguous=True):
        if ndim is not None and len(self.shape) != ndim:
            raise ValueError(f"{self.name}: expected {ndim} dimensions, got shape {list(self.shape)}")
        if dtype == "float" and self.dtype not in (_capi.FS_FLOAT32, _capi.FS_FLOAT16, _capi.FS_BFLOAT16):
            raise TypeError(f"{self.name}: expected float32, float16 or bfloat16, got {self.dtype_name}")
        if dtype == "pages" and self.dtype not in (_capi.FS_FLOAT32, _capi.FS_FLOAT16, _capi.FS_BFLOAT16,
                                                   _capi.FS_FP8_E4M3, _capi.FS_FP8_E5M2, "uint8"):
            raise TypeError(f"{self.name}: expected float32, float16, bfloat16, float8_e4m3fn or float8_e5m2 "
                            f"(uint8 with kv_dtype=), got {self.dtype_name}")
        if dtype == "int32" and self.dtype != "int32":
            raise TypeError(f"{self.name}: expected int32, got {self.dtype_name}")
        if last_contiguous and self.shape and self.shape[-1] > 1 and self.strides[-1] != 1:
            raise ValueError(f"{self.name}: the last dimension must be contiguous")
        return self


def _same_device(*ts):
    """The arrays' one device: (fs_device, CUDA device index or -1)."""
    devs = {(t.device, t.device_index) for t in ts if t is not None}
    if len(devs) > 1:
        names = ", ".join(f"{t.name} on {f'cuda:{t.device_index}' if t.device else 'cpu'}"
                          for t in ts if t is not None)
        raise ValueError(f"all arrays must be on one device: {names}")
    return next(iter(devs))


def _same_dtype(*ts):
    if len({t.dtype for t in ts}) > 1:
        raise TypeError("q, k, v and the output must share a dtype: " + ", ".join(f"{t.name} {t.dtype_name}" for t in ts))


def _on_device(dev):
    """A context in which the library's calls run on dev's device (CUDA: that device current, so
    that the library launches there and plans for its SMs); nothing for the CPU."""
    if dev[0] != _capi.FS_DEVICE_CUDA:
        import contextlib
        return contextlib.nullcontext()
    import torch
    return torch.cuda.device(dev[1])


def _stream(dev):
    """dev's current torch stream (None on the CPU), where the call runs."""
    if dev[0] != _capi.FS_DEVICE_CUDA:
        return None
    import torch
    return torch.cuda.current_stream(dev[1]).cuda_stream


def _empty_like(x, shape, dtype=None):
    if _is_torch(x):
        import torch
        return torch.empty(shape, dtype=dtype or x.dtype, device=x.device)
    return np.empty(shape, dtype=dtype or x.dtype)


def _float32_like(x, shape):
    if _is_torch(x):
        import torch
        return torch.empty(shape, dtype=torch.float32, device=x.device)
    return np.empty(shape, dtype=np.float32)


def _host(x, dtype):
    """A contiguous host numpy copy (or view) of a numpy array, a torch tensor or a list."""
    if _is_torch(x):
        x = x.detach().to("cpu").numpy()
    return np.ascontiguousarray(x, dtype=dtype)


def _mask(args, head_dim, causal, softmax_scale, window, alibi_slopes, softcap, dev, num_heads):
    args.mask.softmax_scale = 1.0 / math.sqrt(head_dim) if softmax_scale is None else float(softmax_scale)
    args.mask.causal = int(bool(causal))
    args.mask.window_left, args.mask.window_right = (int(window[0]), int(window[1]))
    args.mask.softcap = float(softcap)
    if alibi_slopes is not None:
        s = _T(alibi_slopes, "alibi_slopes").need(1)
        if s.dtype != _capi.FS_FLOAT32 or s.shape != (num_heads,):
            raise ValueError(f"alibi_slopes: expected float32 [{num_heads}], got {s.dtype_name} {list(s.shape)}")
        if (s.device, s.device_index) != tuple(dev):
            raise ValueError("alibi_slopes must be on the same device as q")
        if s.device == _capi.FS_DEVICE_CUDA and not np.isfinite(_host(alibi_slopes, np.float32)).all():
            raise FlashserveError("alibi_slopes: every slope must be finite")  # (the CPU call's check)
        args.mask.alibi_slopes = s.ptr
    return args


_FP8_NAMES = {"fp8_e4m3": _capi.FS_FP8_E4M3, "fp8_e5m2": _capi.FS_FP8_E5M2}


def _page_dtype(q, kc, vc, kv_dtype, k_scales, v_scales, num_kv_heads, keep, check=True):
    """The pages' fs_dtype and their scales' pointers: the call's dtype (the caches share q's), or
    FP8 (torch float8 caches, or uint8 codes with kv_dtype "fp8_e4m3"/"fp8_e5m2") with k_scales and
    v_scales float32 [num_kv_heads] (arrays, tensors or lists; each finite and > 0), which the
    kernels read where they run: on the host for CPU caches (the library checks them), a device
    copy for CUDA ones (checked here first: the library does not read device scales on the host;
    check=False takes CUDA float32 tensors on the caches' device as they are, unchecked, with no
    copy). keep collects arrays that must outlive the call."""
    if kc.dtype != vc.dtype:
        raise TypeError(f"k_cache {kc.dtype_name} and v_cache {vc.dtype_name} differ")
    code = kc.dtype
    if code == "uint8":
        if kv_dtype not in _FP8_NAMES:
            raise TypeError(f"uint8 caches hold FP8 codes: kv_dtype must be one of {sorted(_FP8_NAMES)}, got {kv_dtype!r}")
        code = _FP8_NAMES[kv_dtype]
    elif kv_dtype is not None and _FP8_NAMES.get(kv_dtype) != code:
        raise TypeError(f"kv_dtype {kv_dtype!r} does not match the caches' {kc.dtype_name}")
    if code not in (_capi.FS_FP8_E4M3, _capi.FS_FP8_E5M2):
        if k_scales is not None or v_scales is not None:
            raise ValueError("k_scales/v_scales are for FP8 caches")
        _same_dtype(q, kc, vc)
        return 0, None, None
    ptrs = []
    for name, s in (("k_scales", k_scales), ("v_scales", v_scales)):
        if s is None:
            raise ValueError(f"FP8 caches need {name}: float32 [{num_kv_heads}], one a kv head")
        if not check and kc.device == _capi.FS_DEVICE_CUDA and _is_torch(s) and s.is_cuda:
            t = _T(s, name).need(1)
            if t.dtype != _capi.FS_FLOAT32 or t.shape != (num_kv_heads,) or t.device_index != kc.device_index:
                raise ValueError(f"{name}: expected float32 [{num_kv_heads}] on the caches' device, got "
                                 f"{t.dtype_name} {list(t.shape)} on cuda:{t.device_index}")
            keep.append(s)
            ptrs.append(t.ptr)
            continue
        a = _host(s, np.float32)
        if a.shape != (num_kv_heads,):
            raise ValueError(f"{name}: expected float32 [{num_kv_heads}], got shape {list(a.shape)}")
        if kc.device == _capi.FS_DEVICE_CUDA:
            if not (np.isfinite(a).all() and (a > 0).all()):  # the library's check, made here (as its error)
                raise FlashserveError(f"{name}: every scale must be finite and > 0, got {a.tolist()}")
            import torch
            a = torch.from_numpy(a).to(f"cuda:{kc.device_index}")  # on the current stream, before the call
            ptrs.append(a.data_ptr())
        else:
            ptrs.append(a.ctypes.data)
        keep.append(a)
    return code, ptrs[0], ptrs[1]


def _pages_on_host(pages, block_table, lens_host):
    """Points an fs_pages' block table and seq_lens at host copies, for fs_*_check_lengths; returns
    the table's copy, which must outlive the check."""
    table = _host(block_table, np.int32)
    pages.block_table, pages.block_table_stride = table.ctypes.data, table.shape[1]
    pages.seq_lens = lens_host.ctypes.data
    return table


def _pages(args_pages, kc, vc, block_table, seq_lens, page_dtype=(0, None, None)):
    if kc.shape != vc.shape:
        raise ValueError(f"k_cache {list(kc.shape)} and v_cache {list(vc.shape)} differ")
    if kc.strides != vc.strides:
        raise ValueError(f"k_cache strides {list(kc.strides)} and v_cache strides {list(vc.strides)} differ: "
                         "the pages take one set of strides for both")
    p = args_pages
    p.k_pages, p.v_pages = kc.ptr, vc.ptr
    p.block_stride, p.head_stride, p.token_stride = kc.strides[0], kc.strides[1], kc.strides[2]
    p.num_blocks, p.block_size = kc.shape[0], kc.shape[2]
    p.block_table, p.block_table_stride = block_table.ptr, block_table.strides[0]
    p.seq_lens = seq_lens.ptr
    p.dtype, p.k_scales, p.v_scales = page_dtype


# ---- the functions ----------------------------------------------------------------------------

def _prefill(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal, softmax_scale, window, alibi_slopes,
             softcap, out, return_lse, seq_lens, kv_dtype=None, k_scales=None, v_scales=None, total_k=None,
             check=True):
    paged = seq_lens is not None  # pages: k, v are the caches and cu_seqlens_k the block table
    tq = _T(q, "q").need(3, "float")
    tk = _T(k, "k_cache" if paged else "k").need(4 if paged else 3, "pages" if paged else "float")
    tv = _T(v, "v_cache" if paged else "v").need(4 if paged else 3, "pages" if paged else "float")
    cq = _T(cu_seqlens_q, "cu_seqlens_q").need(1, "int32")
    ck = _T(cu_seqlens_k, "block_table" if paged else "cu_seqlens_k").need(2 if paged else 1, "int32")
    batch = cq.shape[0] - 1
    if batch < 0:
        raise ValueError("cu_seqlens_q: needs at least one entry")
    total_q, heads, d = tq.shape
    kv_heads = tk.shape[1]
    if tk.shape[-1] != d or (not paged and tv.shape != tk.shape):
        raise ValueError(f"k/v shapes {list(tk.shape)}, {list(tv.shape)} do not match q {list(tq.shape)}")
    o = _empty_like(q, tq.shape) if out is None else out
    to = _T(o, "out").need(3, "float")
    if to.shape != tq.shape:
        raise ValueError(f"out: expected shape {list(tq.shape)}, got {list(to.shape)}")
    keep = []  # FP8 scales (host arrays or device copies) and the checks' host copies, alive through the call
    if paged:
        page_dtype = _page_dtype(tq, tk, tv, kv_dtype, k_scales, v_scales, kv_heads, keep, check)
        _same_dtype(tq, to)
    else:
        _same_dtype(tq, tk, tv, to)
    lse = _float32_like(q, (total_q, heads))
    tl = _T(lse, "lse")
    dev = _same_device(tq, tk, tv, to, cq, ck, tl)
    a = _capi.PrefillArgs()
    a.device, a.dtype, a.batch = dev[0], tq.dtype, batch
    a.num_heads, a.num_kv_heads, a.head_dim = heads, kv_heads, d
    a.q, a.q_row_stride, a.q_head_stride = tq.ptr, tq.strides[0], tq.strides[1]
    a.cu_seqlens_q, a.total_q = cq.ptr, total_q
    checked = check and dev[0] == _capi.FS_DEVICE_CUDA
    # Host copies: the CUDA call's lengths, checked here (fs_prefill_check_lengths), and the hints.
    cq_host = _host(cu_seqlens_q, np.int32) if checked or max_seqlen_q is None else None
    if max_seqlen_q is None:
        max_seqlen_q = int((cq_host[1:] - cq_host[:-1]).max()) if batch > 0 else 0
    a.max_seqlen_q = int(max_seqlen_q)
    if paged:
        ts = _T(seq_lens, "seq_lens").need(1, "int32")
        if ts.shape[0] != batch or ck.shape[0] != batch:
            raise ValueError(f"block_table {list(ck.shape)} and seq_lens {list(ts.shape)} need {batch} rows")
        _same_device(tq, ts)
        a.paged = 1
        _pages(a.pages, tk, tv, ck, ts, page_dtype)
        # The keys of all sequences: only a hint (the CUDA kernel's key tile), read from seq_lens
        # like max_seqlen_q from cu_seqlens_q when not given.
        lens_host = _host(seq_lens, np.int32) if checked or total_k is None else None
        a.total_k = int(lens_host.astype(np.int64).sum()) if total_k is None else int(total_k)
    else:
        if ck.shape[0] != batch + 1:
            raise ValueError(f"cu_seqlens_k: expected {batch + 1} entries, got {ck.shape[0]}")
        a.k, a.v = tk.ptr, tv.ptr
        a.k_row_stride, a.k_head_stride = tk.strides[0], tk.strides[1]
        a.v_row_stride, a.v_head_stride = tv.strides[0], tv.strides[1]
        a.cu_seqlens_k, a.total_k = ck.ptr, tk.shape[0]
    _mask(a, d, causal, softmax_scale, window, alibi_slopes, softcap, dev, heads)
    a.o, a.o_row_stride, a.o_head_stride = to.ptr, to.strides[0], to.strides[1]
    a.lse = tl.ptr
    lib = _library()
    if checked and hasattr(lib, "fs_prefill_check_lengths"):
        h = _capi.PrefillArgs.from_buffer_copy(a)
        h.cu_seqlens_q = cq_host.ctypes.data
        if paged:
            keep.append(_pages_on_host(h.pages, cu_seqlens_k, lens_host))
        else:
            ck_host = _host(cu_seqlens_k, np.int32)
            h.cu_seqlens_k = ck_host.ctypes.data
        _check(lib.fs_prefill_check_lengths(_capi.ctypes.byref(h)), "varlen_prefill")
    with _on_device(dev):
        _check(lib.fs_prefill_run(_capi.ctypes.byref(a), _stream(dev)), "varlen_prefill")
    return (o, lse) if return_lse else o


def varlen_prefill(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, *, causal=False, softmax_scale=None,
                   window=(-1, -1), alibi_slopes=None, softcap=0.0, out=None, return_lse=False, check=True):
    """Packed varlen attention (FlashAttention's flash_attn_varlen_func): q [total_q, H, D],
    k, v [total_k, Hkv, D], cu_seqlens_* int32 [batch + 1]. Causal is bottom-right aligned.
    Returns o [total_q, H, D] (and lse [total_q, H], natural log, with return_lse).
    On CUDA, check=True copies the lengths to the host and checks them first (0 = first <= ... <=
    last = the rows: a wrong cu_seqlens_q would write rows past out), which waits for the stream;
    check=False (with max_seqlen_q given) makes no host copy, for CUDA graph capture, and leaves
    the lengths to the caller."""
    return _prefill(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal, softmax_scale, window,
                    alibi_slopes, softcap, out, return_lse, seq_lens=None, check=check)


def paged_prefill(q, k_cache, v_cache, cu_seqlens_q, block_table, seq_lens, max_seqlen_q=None, *, causal=True,
                  softmax_scale=None, window=(-1, -1), alibi_slopes=None, softcap=0.0, out=None, return_lse=False,
                  kv_dtype=None, k_scales=None, v_scales=None, total_k=None, check=True):
    """Varlen prefill over the paged cache: the queries of sequence b are the last q_len_b of its
    seq_lens[b] keys (a prompt chunk attending to its cached prefix). FP8 caches (as decode's)
    take k_scales, v_scales float32 [Hkv]. total_k: sum(seq_lens) where the caller knows it (a
    hint for the CUDA kernel's key tile; None reads seq_lens, a copy to the host as for
    max_seqlen_q). check: as varlen_prefill's, over cu_seqlens_q, seq_lens and the block table
    (and FP8 scales: check=False takes CUDA tensors as they are)."""
    return _prefill(q, k_cache, v_cache, cu_seqlens_q, block_table, max_seqlen_q, causal, softmax_scale, window,
                    alibi_slopes, softcap, out, return_lse, seq_lens=seq_lens, kv_dtype=kv_dtype,
                    k_scales=k_scales, v_scales=v_scales, total_k=total_k, check=check)


def decode(q, k_cache, v_cache, block_table, seq_lens, *, causal=True, softmax_scale=None, window=(-1, -1),
           alibi_slopes=None, softcap=0.0, out=None, return_lse=False, num_workers=None, kv_dtype=None,
           k_scales=None, v_scales=None, check=True):
    """Split-K decode over the paged cache (vLLM's paged_attention / FlashInfer's decode):
    q [batch, q_len (1..8), H, D], caches [blocks, Hkv, block_size, D], block_table int32
    [batch, max_blocks], seq_lens int32 [batch] (the new tokens included). The caches hold q's
    dtype, or FP8 (torch.float8_e4m3fn / float8_e5m2, or uint8 codes with kv_dtype "fp8_e4m3" /
    "fp8_e5m2") with k_scales, v_scales float32
    [Hkv]: key = k_scales[h] * fp8. On CUDA the plan reads seq_lens on the host (a copy); check=True
    also copies the block table and checks both first (lengths within the table, ids in the pool),
    check=False leaves them (and CUDA FP8 scale tensors) to the caller."""
    tq = _T(q, "q").need(4, "float")
    tk = _T(k_cache, "k_cache").need(4, "pages")
    tv = _T(v_cache, "v_cache").need(4, "pages")
    tb = _T(block_table, "block_table").need(2, "int32")
    ts = _T(seq_lens, "seq_lens").need(1, "int32")
    batch, q_len, heads, d = tq.shape
    if tb.shape[0] != batch or ts.shape[0] != batch:
        raise ValueError(f"block_table {list(tb.shape)} and seq_lens {list(ts.shape)} need {batch} rows")
    if tk.shape[-1] != d:
        raise ValueError(f"k_cache head_dim {tk.shape[-1]} != q head_dim {d}")
    o = _empty_like(q, tq.shape) if out is None else out
    to = _T(o, "out").need(4, "float")
    if to.shape != tq.shape:
        raise ValueError(f"out: expected shape {list(tq.shape)}, got {list(to.shape)}")
    if to.strides[0] != q_len * to.strides[1] or tq.strides[0] != q_len * tq.strides[1]:
        raise ValueError("q and out: batch and q_len must be contiguous with each other")
    keep = []  # FP8 scales (host arrays or device copies) and the checks' host copies, alive through the call
    page_dtype = _page_dtype(tq, tk, tv, kv_dtype, k_scales, v_scales, tk.shape[1], keep, check)
    _same_dtype(tq, to)
    lse = _float32_like(q, (batch, q_len, heads))
    tl = _T(lse, "lse")
    dev = _same_device(tq, tk, tv, tb, ts, to, tl)
    a = _capi.DecodeArgs()
    a.device, a.dtype, a.batch, a.q_len = dev[0], tq.dtype, batch, q_len
    a.num_heads, a.num_kv_heads, a.head_dim = heads, tk.shape[1], d
    a.q, a.q_row_stride, a.q_head_stride = tq.ptr, tq.strides[1], tq.strides[2]
    _pages(a.pages, tk, tv, tb, ts, page_dtype)
    _mask(a, d, causal, softmax_scale, window, alibi_slopes, softcap, dev, heads)
    a.o, a.o_row_stride, a.o_head_stride = to.ptr, to.strides[1], to.strides[2]
    a.lse = tl.ptr
    workspace = None
    lib = _library()
    with _on_device(dev):
        if dev[0] == _capi.FS_DEVICE_CUDA:  # plan on the host, workspace from torch
            import torch
            lens = _host(seq_lens, np.int32)
            # num_workers None: 0, the device's kernel shape for these pages
            # (fs_decode_plan_create_for_pages: FP8 pages take their own instance's).
            plan = _capi.DecodePlan()
            _check(lib.fs_decode_plan_create_for_pages(batch, lens.ctypes.data, q_len, heads, tk.shape[1], d,
                                                       tk.shape[2], int(num_workers or 0), 0, 64, 0, 0,
                                                       page_dtype[0], _capi.ctypes.byref(plan)),
                   "decode")
            a.num_splits, a.pages_per_split = plan.num_splits, plan.pages_per_split
            if check and hasattr(lib, "fs_decode_check_lengths"):  # the lengths and the table, on host copies
                h = _capi.DecodeArgs.from_buffer_copy(a)
                keep.append(_pages_on_host(h.pages, block_table, lens))
                _check(lib.fs_decode_check_lengths(_capi.ctypes.byref(h)), "decode")
            workspace = torch.empty(max(16, plan.workspace_bytes), dtype=torch.uint8, device=q.device)
            a.workspace, a.workspace_bytes = workspace.data_ptr(), plan.workspace_bytes
        _check(lib.fs_decode_run(_capi.ctypes.byref(a), _stream(dev)), "decode")
    del workspace
    return (o, lse) if return_lse else o


def merge_states(o_a, lse_a, o_b, lse_b):
    """Merges two partial results by logsumexp rescaling (FlashInfer's merge_state): o_* [rows,
    heads, D] (or [rows, D]), lse_* natural log with o's leading shape. Returns (o, lse)."""
    ta, tb = _T(o_a, "o_a").need(None, "float"), _T(o_b, "o_b").need(None, "float")
    la, lb = _T(lse_a, "lse_a"), _T(lse_b, "lse_b")
    if ta.shape != tb.shape or la.shape != lb.shape or la.shape != ta.shape[:-1]:
        raise ValueError(f"shapes: o {list(ta.shape)}/{list(tb.shape)}, lse {list(la.shape)}/{list(lb.shape)}")
    if la.dtype != _capi.FS_FLOAT32 or lb.dtype != _capi.FS_FLOAT32:
        raise TypeError("lse_a, lse_b: expected float32")
    _same_dtype(ta, tb)
    dev = _same_device(ta, tb, la, lb)
    d = ta.shape[-1]
    rows = int(np.prod(ta.shape[:-1]))
    if _is_torch(o_a):
        import torch
        o_in = torch.stack([o_a.reshape(rows, d), o_b.reshape(rows, d)]).contiguous()
        lse_in = torch.stack([lse_a.reshape(rows), lse_b.reshape(rows)]).contiguous()
    else:
        o_in = np.ascontiguousarray(np.stack([o_a.reshape(rows, d), o_b.reshape(rows, d)]))
        lse_in = np.ascontiguousarray(np.stack([lse_a.reshape(rows), lse_b.reshape(rows)]))
    o = _empty_like(o_a, ta.shape)
    lse = _float32_like(o_a, la.shape)
    a = _capi.MergeArgs()
    a.device, a.num_states, a.num_rows, a.head_dim = dev[0], 2, rows, d
    a.in_dtype = a.out_dtype = ta.dtype
    a.o_in, a.o_in_state_stride, a.o_in_row_stride = _T(o_in, "o").ptr, rows * d, d
    a.lse_in, a.lse_in_state_stride, a.lse_in_row_stride = _T(lse_in, "lse").ptr, rows, 1
    a.o_out, a.o_out_row_stride = _T(o, "o").ptr, d
    a.lse_out, a.lse_out_row_stride = _T(lse, "lse").ptr, 1
    with _on_device(dev):
        _check(_library().fs_merge_states(_capi.ctypes.byref(a), _stream(dev)), "merge_states")
    return o, lse


from .kvcache import BlockManager, KVCache, OutOfBlocks  # noqa: E402
