"""ctypes mirror of include/flashserve_c.h: the structs, the enums, and the library loader.
The package's public functions (flashserve/__init__.py) and the GPU benchmarks build on it."""
import ctypes
import os

FS_FLOAT32, FS_FLOAT16, FS_BFLOAT16 = 0, 1, 2
FS_FP8_E4M3, FS_FP8_E5M2 = 3, 4  # KV pages only, with per-(layer, kv head) scales
FS_DEVICE_CPU, FS_DEVICE_CUDA = 0, 1


class Mask(ctypes.Structure):
    _fields_ = [("softmax_scale", ctypes.c_float), ("causal", ctypes.c_int32),
                ("window_left", ctypes.c_int32), ("window_right", ctypes.c_int32),
                ("alibi_slopes", ctypes.c_void_p), ("softcap", ctypes.c_float)]


class Pages(ctypes.Structure):
    _fields_ = [("k_pages", ctypes.c_void_p), ("v_pages", ctypes.c_void_p),
                ("block_stride", ctypes.c_int64), ("head_stride", ctypes.c_int64),
                ("token_stride", ctypes.c_int64), ("num_blocks", ctypes.c_int32),
                ("block_size", ctypes.c_int32), ("block_table", ctypes.c_void_p),
                ("block_table_stride", ctypes.c_int64), ("seq_lens", ctypes.c_void_p),
                # what the pages hold: FS_FLOAT32 (0) = the call's dtype; FP8 with its scales
                ("dtype", ctypes.c_int32), ("k_scales", ctypes.c_void_p), ("v_scales", ctypes.c_void_p)]


class DecodeArgs(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int32), ("dtype", ctypes.c_int32), ("batch", ctypes.c_int32),
                ("q_len", ctypes.c_int32), ("num_heads", ctypes.c_int32),
                ("num_kv_heads", ctypes.c_int32), ("head_dim", ctypes.c_int32),
                ("q", ctypes.c_void_p), ("q_row_stride", ctypes.c_int64),
                ("q_head_stride", ctypes.c_int64), ("pages", Pages), ("mask", Mask),
                ("o", ctypes.c_void_p), ("o_row_stride", ctypes.c_int64),
                ("o_head_stride", ctypes.c_int64), ("lse", ctypes.c_void_p),
                ("num_splits", ctypes.c_int32), ("pages_per_split", ctypes.c_int32),
                ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_int64)]


class PrefillArgs(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int32), ("dtype", ctypes.c_int32), ("batch", ctypes.c_int32),
                ("num_heads", ctypes.c_int32), ("num_kv_heads", ctypes.c_int32), ("head_dim", ctypes.c_int32),
                ("q", ctypes.c_void_p), ("q_row_stride", ctypes.c_int64), ("q_head_stride", ctypes.c_int64),
                ("cu_seqlens_q", ctypes.c_void_p), ("total_q", ctypes.c_int64), ("max_seqlen_q", ctypes.c_int32),
                ("paged", ctypes.c_int32), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("k_row_stride", ctypes.c_int64), ("k_head_stride", ctypes.c_int64),
                ("v_row_stride", ctypes.c_int64), ("v_head_stride", ctypes.c_int64),
                ("cu_seqlens_k", ctypes.c_void_p), ("total_k", ctypes.c_int64), ("pages", Pages),
                ("mask", Mask), ("o", ctypes.c_void_p), ("o_row_stride", ctypes.c_int64),
                ("o_head_stride", ctypes.c_int64), ("lse", ctypes.c_void_p)]


class MergeArgs(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int32), ("num_states", ctypes.c_int32), ("num_rows", ctypes.c_int64),
                ("head_dim", ctypes.c_int32), ("in_dtype", ctypes.c_int32), ("o_in", ctypes.c_void_p),
                ("o_in_state_stride", ctypes.c_int64), ("o_in_row_stride", ctypes.c_int64),
                ("lse_in", ctypes.c_void_p), ("lse_in_state_stride", ctypes.c_int64),
                ("lse_in_row_stride", ctypes.c_int64), ("out_dtype", ctypes.c_int32), ("o_out", ctypes.c_void_p),
                ("o_out_row_stride", ctypes.c_int64), ("lse_out", ctypes.c_void_p),
                ("lse_out_row_stride", ctypes.c_int64)]


class DecodePlan(ctypes.Structure):
    _fields_ = [("num_splits", ctypes.c_int32), ("pages_per_split", ctypes.c_int32),
                ("work_items", ctypes.c_int64), ("wave_fill", ctypes.c_double),
                ("workspace_bytes", ctypes.c_int64)]


def _default_path():
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.environ.get("FLASHSERVE_LIB"), os.path.join(here, "libflashserve_c.so"),
                 os.path.join(here, "..", "..", "build", "libflashserve_c.so"), "libflashserve_c.so"):
        if cand and (os.path.exists(cand) or "/" not in cand):
            return cand
    return "libflashserve_c.so"


class KVShape(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int32) for n in ("num_layers", "num_blocks", "num_kv_heads", "block_size", "head_dim",
                                                "dtype")]


class BlockManagerConfig(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int32) for n in ("num_blocks", "block_size", "enable_prefix_caching",
                                                "max_blocks_per_seq")]


class BlockManagerStats(ctypes.Structure):
    _fields_ = [("prefix_queries", ctypes.c_int64), ("prefix_hits", ctypes.c_int64), ("evictions", ctypes.c_int64),
                ("num_free_blocks", ctypes.c_int32), ("num_usable_blocks", ctypes.c_int32),
                ("num_sequences", ctypes.c_int32)]


def load(path=None):
    path = path or _default_path()
    lib = ctypes.CDLL(os.path.abspath(path) if os.path.exists(path) else path)
    lib.fs_last_error.restype = ctypes.c_char_p
    lib.fs_decode_plan_create.argtypes = [ctypes.c_int32, ctypes.c_void_p] + [ctypes.c_int32] * 10 + [
        ctypes.POINTER(DecodePlan)]
    lib.fs_decode_plan_create_for_pages.argtypes = [ctypes.c_int32, ctypes.c_void_p] + [ctypes.c_int32] * 11 + [
        ctypes.POINTER(DecodePlan)]
    lib.fs_decode_run.argtypes = [ctypes.POINTER(DecodeArgs), ctypes.c_void_p]
    lib.fs_prefill_run.argtypes = [ctypes.POINTER(PrefillArgs), ctypes.c_void_p]
    for name, args in (("fs_prefill_check_lengths", PrefillArgs), ("fs_decode_check_lengths", DecodeArgs)):
        if hasattr(lib, name):  # (a benchmark may load a build from before them)
            getattr(lib, name).argtypes = [ctypes.POINTER(args)]
    if hasattr(lib, "fs_prefill_ws_key_tile"):  # (a benchmark may load a build from before it)
        lib.fs_prefill_ws_key_tile.argtypes = [ctypes.POINTER(PrefillArgs), ctypes.POINTER(ctypes.c_int32)]
    lib.fs_cuda_sm_count.argtypes = [ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)]
    lib.fs_merge_states.argtypes = [ctypes.POINTER(MergeArgs), ctypes.c_void_p]
    vp, i32, i64, p = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.POINTER
    lib.fs_kv_storage_create.argtypes = [i32, p(KVShape), p(vp)]
    lib.fs_kv_storage_destroy.argtypes = [vp]
    lib.fs_kv_storage_destroy.restype = None
    lib.fs_kv_storage_pages.argtypes = [vp, i32, p(Pages)]
    lib.fs_kv_append.argtypes = [vp, i32, i32, vp, vp, vp, i64, vp]
    lib.fs_kv_append_from.argtypes = [vp, i32, i32, i32, vp, vp, vp, i64, vp]
    lib.fs_kv_set_scales.argtypes = [vp, i32, vp, vp]
    lib.fs_kv_check_slots.argtypes = [vp, vp, i64]
    lib.fs_kv_copy_blocks.argtypes = [vp, vp, i32, vp]
    lib.fs_block_manager_create.argtypes = [p(BlockManagerConfig), p(vp)]
    lib.fs_block_manager_destroy.argtypes = [vp]
    lib.fs_block_manager_destroy.restype = None
    lib.fs_block_manager_add_sequence.argtypes = [vp, i64, vp, i32, ctypes.c_uint64, p(i32)]
    lib.fs_block_manager_blocks_needed.argtypes = [vp, i64, i32]
    lib.fs_block_manager_allocate_slots.argtypes = [vp, i64, i32, vp, vp, vp, i32, p(i32)]
    lib.fs_block_manager_fork.argtypes = [vp, i64, i64]
    lib.fs_block_manager_free_sequence.argtypes = [vp, i64]
    lib.fs_block_manager_block_table.argtypes = [vp, i64, vp, i32, p(i32)]
    lib.fs_block_manager_stats_get.argtypes = [vp, p(BlockManagerStats)]
    return lib


def check(lib, rc, what):
    if rc != 0:
        raise RuntimeError(f"{what}: {lib.fs_last_error().decode()}")
