"""The paged KV cache from Python, over the C ABI's fs_block_manager and fs_kv_storage.

    bm = flashserve.BlockManager(num_blocks=1024, block_size=16)
    cached = bm.add_sequence(7, prompt_ids)          # prompt tokens whose K/V are already cached
    slots, copies = bm.allocate_slots(7, len(prompt_ids) - cached)
    kv = flashserve.KVCache(num_layers=32, num_blocks=1024, num_kv_heads=8, head_dim=128,
                            dtype="float16", device="cpu")
    kv.copy_blocks(copies)                           # copy-on-write work first
    kv.append(k_new, v_new, slots)                   # [num_layers, n, Hkv, D] (or [n, Hkv, D])
    k_cache, v_cache = kv.layer(0)                   # [blocks, Hkv, block_size, D] views of layer 0
    o = flashserve.decode(q, k_cache, v_cache, block_table, seq_lens)

On the CPU the pools are numpy arrays (float32, float16; bfloat16 needs torch; FP8 caches,
dtype "fp8_e4m3" / "fp8_e5m2", are uint8 arrays of the codes); on CUDA they are torch tensors over
the storage's memory (through __cuda_array_interface__; FP8 caches: torch.float8_e4m3fn /
float8_e5m2). An FP8 cache keeps a scale per (layer, kv head) for K and for V (1.0 until
set_scales), quantizes float32 / float16 / bfloat16 K/V on append (round to nearest even,
saturating; NaN stays NaN), and page_args(layer) gives decode and paged_prefill what they need to
read it:

    kv = flashserve.KVCache(32, 1024, 8, 128, dtype="fp8_e4m3")
    kv.set_scales(0, k_amax / 448, v_amax / 448)     # float32 [num_kv_heads], before appending
    kv.append(k_new_bf16, v_new_bf16, slots)
    o = flashserve.decode(q, *kv.layer(0), block_table, seq_lens, **kv.page_args(0))

Errors from the library raise FlashserveError; running out of blocks raises OutOfBlocks (nothing
changed).
"""
import ctypes

import numpy as np

from . import _capi

_DTYPES = {"float32": _capi.FS_FLOAT32, "float16": _capi.FS_FLOAT16, "bfloat16": _capi.FS_BFLOAT16,
           "fp8_e4m3": _capi.FS_FP8_E4M3, "fp8_e5m2": _capi.FS_FP8_E5M2}
_FP8 = ("fp8_e4m3", "fp8_e5m2")
_FLOATS = (_capi.FS_FLOAT32, _capi.FS_FLOAT16, _capi.FS_BFLOAT16)
FS_RESOURCE_EXHAUSTED = 4


class OutOfBlocks(RuntimeError):
    """The pool has too few free blocks now: a normal result (preempt or wait), nothing changed."""


def _lib():
    from . import _library
    return _library()


def _check(rc, what):
    if rc == FS_RESOURCE_EXHAUSTED:
        raise OutOfBlocks(f"{what}: {_lib().fs_last_error().decode()}")
    from . import _check as check
    check(rc, what)


def _host_1d(x, dtype):
    from . import _host
    a = _host(x, dtype)
    if a.ndim != 1:
        raise ValueError(f"expected a 1-D array, got shape {list(a.shape)}")
    return a


class BlockManager:
    """The block pool with prefix caching (fs_block_manager): sequences, slots, fork with
    copy-on-write, block tables. Block 0 is the null block."""

    def __init__(self, num_blocks, block_size=16, enable_prefix_caching=True, max_blocks_per_seq=0):
        cfg = _capi.BlockManagerConfig(int(num_blocks), int(block_size), int(bool(enable_prefix_caching)),
                                       int(max_blocks_per_seq))
        self._h = ctypes.c_void_p()
        _check(_lib().fs_block_manager_create(ctypes.byref(cfg), ctypes.byref(self._h)), "BlockManager")
        self.num_blocks, self.block_size = int(num_blocks), int(block_size)

    def close(self):
        if getattr(self, "_h", None):
            try:
                _lib().fs_block_manager_destroy(self._h)
            except Exception:  # interpreter shutdown: the process frees it
                pass
            self._h = None

    __del__ = close

    def add_sequence(self, seq_id, prompt, extra_key=0):
        """Registers a sequence; returns how many prompt tokens already have cached K/V."""
        p = _host_1d(prompt, np.int32)
        cached = ctypes.c_int32(0)
        _check(_lib().fs_block_manager_add_sequence(self._h, int(seq_id), p.ctypes.data, len(p), int(extra_key),
                                                    ctypes.byref(cached)), "add_sequence")
        return cached.value

    def blocks_needed(self, seq_id, n):
        return _lib().fs_block_manager_blocks_needed(self._h, int(seq_id), int(n))

    def allocate_slots(self, seq_id, n, new_tokens=None):
        """Slots (int64 [n]) for the sequence's next n tokens, and copy-on-write pairs [(src, dst)]
        for KVCache.copy_blocks. new_tokens: the n generated ids of a decode step, or None."""
        n = int(n)
        toks = None if new_tokens is None else _host_1d(new_tokens, np.int32)
        if toks is not None and len(toks) != n:
            raise ValueError(f"new_tokens: expected {n} ids, got {len(toks)}")
        slots = np.empty(n, dtype=np.int64)
        copies = np.empty(2, dtype=np.int32)
        ncopies = ctypes.c_int32(0)
        _check(_lib().fs_block_manager_allocate_slots(self._h, int(seq_id), n,
                                                      None if toks is None else toks.ctypes.data, slots.ctypes.data,
                                                      copies.ctypes.data, 1, ctypes.byref(ncopies)), "allocate_slots")
        return slots, [(int(copies[0]), int(copies[1]))] if ncopies.value else []

    def fork(self, parent_id, child_id):
        _check(_lib().fs_block_manager_fork(self._h, int(parent_id), int(child_id)), "fork")

    def free(self, seq_id):
        _check(_lib().fs_block_manager_free_sequence(self._h, int(seq_id)), "free")

    def block_table(self, seq_id):
        out = np.empty(max(1, self.num_blocks), dtype=np.int32)
        n = ctypes.c_int32(0)
        _check(_lib().fs_block_manager_block_table(self._h, int(seq_id), out.ctypes.data, len(out), ctypes.byref(n)),
               "block_table")
        return out[:n.value].copy()

    def stats(self):
        s = _capi.BlockManagerStats()
        _check(_lib().fs_block_manager_stats_get(self._h, ctypes.byref(s)), "stats")
        return {name: getattr(s, name) for name, _ in s._fields_}


class _CudaArray:
    """A __cuda_array_interface__ view of device memory owned by a KVCache (kept alive)."""

    def __init__(self, ptr, shape, typestr, owner):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr, "version": 2}
        self._owner = owner


class _Storage:
    """Owns one fs_kv_storage handle; freed when the last KVCache or pool view lets go of it."""

    def __init__(self, handle):
        self.handle = handle

    def __del__(self):
        if self.handle:
            try:
                _lib().fs_kv_storage_destroy(self.handle)
            except Exception:  # interpreter shutdown: the process frees it
                pass
            self.handle = None


class KVCache:
    """Every layer's K and V pages on one device (fs_kv_storage), laid out
    [num_layers][num_blocks][K, V][num_kv_heads][block_size][head_dim], zero-filled. CUDA
    storage lives on the device current when it is made; calls check that inputs are there."""

    def __init__(self, num_layers, num_blocks, num_kv_heads, head_dim, block_size=16, dtype="bfloat16",
                 device="cpu"):
        if dtype not in _DTYPES:
            raise TypeError(f"dtype: expected one of {sorted(_DTYPES)}, got {dtype!r}")
        if device not in ("cpu", "cuda"):
            raise ValueError(f"device: expected 'cpu' or 'cuda', got {device!r}")
        self.shape = _capi.KVShape(int(num_layers), int(num_blocks), int(num_kv_heads), int(block_size),
                                   int(head_dim), _DTYPES[dtype])
        self.dtype, self.device = dtype, device
        self._dev = _capi.FS_DEVICE_CUDA if device == "cuda" else _capi.FS_DEVICE_CPU
        self._index = -1
        self._storage = None
        if device == "cuda":
            import torch
            self._index = torch.cuda.current_device()
        h = ctypes.c_void_p()
        with self._on_device():
            _check(_lib().fs_kv_storage_create(self._dev, ctypes.byref(self.shape), ctypes.byref(h)), "KVCache")
        self._storage = _Storage(h)

    def close(self):
        """Lets go of the storage; it is freed once no pool view from layer() holds it either."""
        self._storage = None

    @property
    def _h(self):
        if self._storage is None:
            raise ValueError("KVCache is closed")
        return self._storage.handle

    def _on_device(self):
        if self._index < 0:
            import contextlib
            return contextlib.nullcontext()
        import torch
        return torch.cuda.device(self._index)

    def _stream(self):
        if self._index < 0:
            return None
        import torch
        return torch.cuda.current_stream(self._index).cuda_stream

    def _pool_shape(self):  # one layer: [num_blocks, 2 (K, V), num_kv_heads, block_size, head_dim]
        s = self.shape
        return (s.num_blocks, 2, s.num_kv_heads, s.block_size, s.head_dim)

    def _wrap(self, ptr):
        shape, n = self._pool_shape(), int(np.prod(self._pool_shape()))
        if self.device == "cpu":  # FP8 caches: uint8 arrays of the codes (numpy has no FP8 type)
            # The views keep this cache (and so the memory) alive through their buffer.
            ctype = {"float32": ctypes.c_float, "fp8_e4m3": ctypes.c_uint8, "fp8_e5m2": ctypes.c_uint8}.get(
                self.dtype, ctypes.c_uint16)
            buf = (ctype * n).from_address(ptr)
            buf._owner = self._storage
            if self.dtype != "bfloat16":
                a = np.ctypeslib.as_array(buf).reshape(shape)
                return a.view(np.float16) if self.dtype == "float16" else a
            import torch
            return torch.frombuffer(buf, dtype=torch.int16).view(torch.bfloat16).reshape(shape)
        import torch
        typestr = {"float32": "<f4", "float16": "<f2", "bfloat16": "<i2", "fp8_e4m3": "|u1",
                   "fp8_e5m2": "|u1"}[self.dtype]
        t = torch.as_tensor(_CudaArray(ptr, shape, typestr, self._storage), device=f"cuda:{self._index}")
        # FP8 caches: torch's float8 tensors over the codes (decode and paged_prefill take them).
        view = {"bfloat16": torch.bfloat16, "fp8_e4m3": getattr(torch, "float8_e4m3fn", None),
                "fp8_e5m2": getattr(torch, "float8_e5m2", None)}.get(self.dtype, t.dtype)
        if view is None:
            raise TypeError(f"a CUDA {self.dtype} cache's views need torch's float8 types (torch >= 2.1)")
        return t.view(view)

    def layer(self, layer):
        """(k_cache, v_cache) of one layer: [num_blocks, num_kv_heads, block_size, head_dim] views of
        its pool (strided: a block's K and V are adjacent), ready for decode and paged_prefill."""
        pages = _capi.Pages()
        _check(_lib().fs_kv_storage_pages(self._h, int(layer), ctypes.byref(pages)), "layer")
        pool = self._wrap(pages.k_pages)
        return pool[:, 0], pool[:, 1]

    def set_scales(self, layer, k_scales, v_scales):
        """An FP8 cache's scales for one layer: float32 [num_kv_heads] each, finite and > 0 (one
        value repeated is a per-tensor scale). Set them before appending that layer's K/V: the
        pages keep the codes already written (key = k_scales[h] * fp8(code))."""
        if self.dtype not in _FP8:
            raise TypeError(f"set_scales: the cache is {self.dtype}, not FP8")
        arrs = []
        for name, x in (("k_scales", k_scales), ("v_scales", v_scales)):
            a = _host_1d(x, np.float32)
            if a.shape != (self.shape.num_kv_heads,):
                raise ValueError(f"{name}: expected float32 [{self.shape.num_kv_heads}], got shape {list(a.shape)}")
            arrs.append(a)
        _check(_lib().fs_kv_set_scales(self._h, int(layer), arrs[0].ctypes.data, arrs[1].ctypes.data), "set_scales")

    def scales(self, layer):
        """An FP8 cache's (k_scales, v_scales) of one layer: float32 [num_kv_heads] copies."""
        if self.dtype not in _FP8:
            raise TypeError(f"scales: the cache is {self.dtype}, not FP8")
        pages = _capi.Pages()
        _check(_lib().fs_kv_storage_pages(self._h, int(layer), ctypes.byref(pages)), "scales")
        hk = self.shape.num_kv_heads
        if self.device != "cpu":  # the pages' scales are the storage's device copy there
            import torch
            return tuple(torch.as_tensor(_CudaArray(p, (hk,), "<f4", self._storage), device=f"cuda:{self._index}")
                         .cpu().numpy().copy() for p in (pages.k_scales, pages.v_scales))
        return tuple(np.ctypeslib.as_array((ctypes.c_float * hk).from_address(p)).copy()
                     for p in (pages.k_scales, pages.v_scales))

    def page_args(self, layer):
        """What decode and paged_prefill need besides the pools to read one layer: for an FP8 cache
        kv_dtype and that layer's scales, else nothing."""
        if self.dtype not in _FP8:
            return {}
        k_scales, v_scales = self.scales(layer)
        return {"kv_dtype": self.dtype, "k_scales": k_scales, "v_scales": v_scales}

    def append(self, k_new, v_new, slots, first_layer=0, check=True):
        """Writes n tokens' K and V: k_new, v_new [num_layers, n, Hkv, D] (or [n, Hkv, D] for one
        layer) contiguous, on the cache's device, in the cache's dtype or, into an FP8 cache,
        float32 / float16 / bfloat16, quantized with that layer's scales (and, on the CPU, float32
        into a 16-bit cache); slots int64 [n] on its device (-1 = padding). check=True checks the
        slots on the host first (a copy from the GPU)."""
        from . import _T
        tk, tv, ts = _T(k_new, "k_new"), _T(v_new, "v_new"), _T(slots, "slots")
        if len(tk.shape) == 3:
            num_layers, shape = 1, tk.shape
        elif len(tk.shape) == 4:
            num_layers, shape = tk.shape[0], tk.shape[1:]
        else:
            raise ValueError(f"k_new: expected [num_layers, n, Hkv, D] or [n, Hkv, D], got {list(tk.shape)}")
        s = self.shape
        if tuple(shape[1:]) != (s.num_kv_heads, s.head_dim) or tv.shape != tk.shape:
            raise ValueError(f"k_new {list(tk.shape)}, v_new {list(tv.shape)}: expected [..., n, {s.num_kv_heads}, "
                             f"{s.head_dim}] both")
        if tk.dtype != tv.dtype:
            raise TypeError(f"k_new {tk.dtype_name} and v_new {tv.dtype_name} differ")
        src = tk.dtype
        convert = (self.dtype in _FP8 and src in _FLOATS) or (
            self.device == "cpu" and src == _capi.FS_FLOAT32 and self.dtype in ("float16", "bfloat16"))
        for t in (tk, tv):
            if t.dtype != s.dtype and not convert:
                allowed = "float32, float16 or bfloat16" if self.dtype in _FP8 else (
                    f"{self.dtype} or float32" if self.device == "cpu" and self.dtype != "float32" else self.dtype)
                raise TypeError(f"{t.name}: expected {allowed}, got {t.dtype_name}")
            if t.device != self._dev or (self._index >= 0 and t.device_index != self._index):
                raise ValueError(f"{t.name}: expected on {self.device}"
                                 + (f":{self._index}" if self._index >= 0 else ""))
            expect, acc = [], 1
            for dim in reversed(t.shape):
                expect.insert(0, acc)
                acc *= dim
            if any(d > 1 and st != e for d, st, e in zip(t.shape, t.strides, expect)):
                raise ValueError(f"{t.name}: must be contiguous")
        n = shape[0]
        if (len(ts.shape) != 1 or ts.shape[0] != n or ts.dtype_name not in ("int64", "torch.int64")
                or ts.device != self._dev or (self._index >= 0 and ts.device_index != self._index)):
            raise ValueError(f"slots: expected int64 [{n}] on {self.device}, got {ts.dtype_name} {list(ts.shape)}")
        if ts.strides and ts.strides[0] != 1 and n > 1:
            raise ValueError("slots: must be contiguous")
        if check and self.device == "cuda":
            host = _host_1d(slots, np.int64)
            _check(_lib().fs_kv_check_slots(self._h, host.ctypes.data, n), "append")
        with self._on_device():
            _check(_lib().fs_kv_append_from(self._h, int(first_layer), num_layers, src, tk.ptr, tv.ptr, ts.ptr, n,
                                            self._stream()), "append")

    def copy_blocks(self, pairs):
        """Copies block src to dst in every layer, K and V, for each (src, dst): copy-on-write."""
        flat = np.ascontiguousarray(np.asarray(pairs, dtype=np.int32).reshape(-1, 2))
        if flat.size == 0:
            return
        with self._on_device():
            _check(_lib().fs_kv_copy_blocks(self._h, flat.ctypes.data, len(flat), self._stream()), "copy_blocks")
