// The C ABI over the C++ entry points: converts the C structs, catches everything, keeps the
// last error per thread.
#include "flashserve_c.h"
#include "capi/guard.h"

#include <exception>
#include <string>

#include "attention/merge.h"
#include "attention/prefill.h"
#include "common/cuda_device.h"
#include "decode/decode.h"
#include "decode/planner.h"

namespace flashserve::capi {
std::string& last_error() {
  thread_local std::string message;
  return message;
}
}  // namespace flashserve::capi

namespace {

using flashserve::capi::guarded;

flashserve::MaskParams to_mask(const fs_mask& m) {
  flashserve::MaskParams out;
  out.softmax_scale = m.softmax_scale;
  out.causal = m.causal != 0;
  out.window_left = m.window_left;
  out.window_right = m.window_right;
  out.alibi_slopes = m.alibi_slopes;
  out.softcap = m.softcap;
  return out;
}

flashserve::KVPageView to_pages(const fs_pages& p) {
  flashserve::KVPageView v;
  v.k_pages = p.k_pages;
  v.v_pages = p.v_pages;
  v.block_stride = p.block_stride;
  v.head_stride = p.head_stride;
  v.token_stride = p.token_stride;
  v.num_blocks = p.num_blocks;
  v.block_size = p.block_size;
  v.block_table = p.block_table;
  v.block_table_stride = p.block_table_stride;
  v.seq_lens = p.seq_lens;
  v.k_scales = p.k_scales;
  v.v_scales = p.v_scales;
  return v;
}

// The fields fs_decode_args and fs_prefill_args share with DecodeParams / PrefillParams.
template <typename Args, typename Params>
void copy_common(const Args& a, Params& p) {
  p.device = static_cast<flashserve::Device>(a.device);
  p.dtype = static_cast<flashserve::DType>(a.dtype);
  p.batch = a.batch;
  p.num_heads = a.num_heads;
  p.num_kv_heads = a.num_kv_heads;
  p.head_dim = a.head_dim;
  p.q = a.q;
  p.q_row_stride = a.q_row_stride;
  p.q_head_stride = a.q_head_stride;
  p.pages = to_pages(a.pages);
  // FS_FLOAT32 (0, a zeroed fs_pages) means the call's dtype (include/flashserve_c.h).
  p.pages.dtype = a.pages.dtype == FS_FLOAT32 ? p.dtype : static_cast<flashserve::DType>(a.pages.dtype);
  p.mask = to_mask(a.mask);
  p.o = a.o;
  p.o_row_stride = a.o_row_stride;
  p.o_head_stride = a.o_head_stride;
  p.lse = a.lse;
}

flashserve::PrefillParams to_prefill_params(const fs_prefill_args& a) {
  flashserve::PrefillParams p;
  copy_common(a, p);
  p.cu_seqlens_q = a.cu_seqlens_q;
  p.total_q = a.total_q;
  p.max_seqlen_q = a.max_seqlen_q;
  p.paged = a.paged != 0;
  p.k = a.k;
  p.v = a.v;
  p.k_row_stride = a.k_row_stride;
  p.k_head_stride = a.k_head_stride;
  p.v_row_stride = a.v_row_stride;
  p.v_head_stride = a.v_head_stride;
  p.cu_seqlens_k = a.cu_seqlens_k;
  p.total_k = a.total_k;
  return p;
}

flashserve::DecodeParams to_decode_params(const fs_decode_args& a) {
  flashserve::DecodeParams p;
  copy_common(a, p);
  p.q_len = a.q_len;
  p.num_splits = a.num_splits;
  p.pages_per_split = a.pages_per_split;
  p.workspace = a.workspace;
  p.workspace_bytes = a.workspace_bytes;
  return p;
}

}  // namespace

extern "C" {

const char* fs_last_error(void) { return flashserve::capi::last_error().c_str(); }
const char* fs_version(void) { return FLASHSERVE_VERSION; }  // CMakeLists.txt project()

int fs_decode_plan_create(int32_t batch, const int32_t* seq_lens_host, int32_t q_len, int32_t num_heads,
                          int32_t num_kv_heads, int32_t head_dim, int32_t block_size, int32_t num_workers,
                          int32_t min_pages_per_split, int32_t max_splits, int32_t graph_mode,
                          int32_t max_seq_len, fs_decode_plan* out) {
  return fs_decode_plan_create_for_pages(batch, seq_lens_host, q_len, num_heads, num_kv_heads, head_dim, block_size,
                                         num_workers, min_pages_per_split, max_splits, graph_mode, max_seq_len,
                                         FS_FLOAT32, out);
}

int fs_decode_plan_create_for_pages(int32_t batch, const int32_t* seq_lens_host, int32_t q_len, int32_t num_heads,
                                    int32_t num_kv_heads, int32_t head_dim, int32_t block_size, int32_t num_workers,
                                    int32_t min_pages_per_split, int32_t max_splits, int32_t graph_mode,
                                    int32_t max_seq_len, int32_t pages_dtype, fs_decode_plan* out) {
  return guarded("fs_decode_plan_create", [&] {
    if (out == nullptr) return flashserve::invalid_argument("fs_decode_plan_create: out is null");
    if (pages_dtype < FS_FLOAT32 || pages_dtype > FS_FP8_E5M2)
      return flashserve::invalid_argument("fs_decode_plan_create: pages_dtype " + std::to_string(pages_dtype) +
                                          " is not an fs_dtype");
    // 16-bit pages plan with the bf16 instance (fp16's takes the same resources), FP8 ones with
    // the bf16 call's FP8 instance.
    const flashserve::DType pages = pages_dtype == FS_FP8_E4M3   ? flashserve::DType::kFp8E4M3
                                    : pages_dtype == FS_FP8_E5M2 ? flashserve::DType::kFp8E5M2
                                                                 : flashserve::DType::kBFloat16;
    flashserve::DecodePlanInput in;
    in.batch = batch;
    in.seq_lens = seq_lens_host;
    in.q_len = q_len;
    in.num_heads = num_heads;
    in.num_kv_heads = num_kv_heads;
    in.head_dim = head_dim;
    in.block_size = block_size;
    if (num_workers < 0)
      return flashserve::invalid_argument("fs_decode_plan_create: num_workers " + std::to_string(num_workers) +
                                          " < 0 (0 asks the machine)");
    if (num_workers == 0) {
      FS_RETURN_IF_ERROR(
          flashserve::decode_local_launch_shape(head_dim, flashserve::DType::kBFloat16, pages, &in.shape));
    } else {
      // num_workers workers of the CUDA kernel's rows (include/flashserve_c.h).
      in.shape = flashserve::DecodeLaunchShape{flashserve::kDecodeRowsPerCta, 1, num_workers};
    }
    in.min_pages_per_split = min_pages_per_split;
    in.max_splits = max_splits;
    in.graph_mode = graph_mode != 0;
    in.max_seq_len = max_seq_len;
    flashserve::DecodePlan plan;
    flashserve::Status st = flashserve::plan_decode(in, &plan);
    if (st.ok()) {
      out->num_splits = plan.num_splits;
      out->pages_per_split = plan.pages_per_split;
      out->work_items = plan.work_items;
      out->wave_fill = plan.wave_fill;
      out->workspace_bytes = plan.workspace_bytes;
    }
    return st;
  });
}

int fs_decode_run(const fs_decode_args* a, void* stream) {
  return guarded("fs_decode_run", [&] {
    if (a == nullptr) return flashserve::invalid_argument("fs_decode_run: args is null");
    return flashserve::decode(to_decode_params(*a), stream);
  });
}

int fs_prefill_run(const fs_prefill_args* a, void* stream) {
  return guarded("fs_prefill_run", [&] {
    if (a == nullptr) return flashserve::invalid_argument("fs_prefill_run: args is null");
    return flashserve::prefill(to_prefill_params(*a), stream);
  });
}

int fs_prefill_check_lengths(const fs_prefill_args* a) {
  return guarded("fs_prefill_check_lengths", [&] {
    if (a == nullptr) return flashserve::invalid_argument("fs_prefill_check_lengths: args is null");
    if (a->batch < 0 || (a->paged && (a->pages.block_size <= 0 || a->pages.block_table_stride < 0)))
      return flashserve::invalid_argument("fs_prefill_check_lengths: batch < 0, or pages of block_size <= 0 or a "
                                          "negative block_table_stride");
    const bool copies = a->cu_seqlens_q != nullptr && (a->paged ? a->pages.block_table != nullptr &&
                                                                      a->pages.seq_lens != nullptr
                                                                : a->cu_seqlens_k != nullptr);
    if (a->batch > 0 && !copies)
      return flashserve::invalid_argument(
          "fs_prefill_check_lengths: a host copy (cu_seqlens, block table, seq_lens) is null");
    return flashserve::validate_prefill_lengths_host(to_prefill_params(*a));
  });
}

int fs_decode_check_lengths(const fs_decode_args* a) {
  return guarded("fs_decode_check_lengths", [&] {
    if (a == nullptr) return flashserve::invalid_argument("fs_decode_check_lengths: args is null");
    if (a->batch < 0 || a->pages.block_size <= 0 || a->pages.block_table_stride < 0)
      return flashserve::invalid_argument("fs_decode_check_lengths: batch < 0, block_size <= 0 or a negative "
                                          "block_table_stride");
    if (a->batch > 0 && (a->pages.block_table == nullptr || a->pages.seq_lens == nullptr))
      return flashserve::invalid_argument("fs_decode_check_lengths: a host copy (block table, seq_lens) is null");
    return flashserve::validate_decode_lengths_host(to_decode_params(*a));
  });
}

int fs_prefill_ws_key_tile(const fs_prefill_args* a, int32_t* key_tile) {
  return guarded("fs_prefill_ws_key_tile", [&] {
    if (a == nullptr || key_tile == nullptr)
      return flashserve::invalid_argument("fs_prefill_ws_key_tile: args or key_tile is null");
    int tile = 0;
    flashserve::Status st = flashserve::prefill_ws_key_tile(to_prefill_params(*a), &tile);
    if (st.ok()) *key_tile = tile;
    return st;
  });
}

int fs_merge_states(const fs_merge_args* a, void* stream) {
  return guarded("fs_merge_states", [&] {
    if (a == nullptr) return flashserve::invalid_argument("fs_merge_states: args is null");
    flashserve::MergeParams p;
    p.device = static_cast<flashserve::Device>(a->device);
    p.num_states = a->num_states;
    p.num_rows = a->num_rows;
    p.head_dim = a->head_dim;
    p.in_dtype = static_cast<flashserve::DType>(a->in_dtype);
    p.o_in = a->o_in;
    p.o_in_state_stride = a->o_in_state_stride;
    p.o_in_row_stride = a->o_in_row_stride;
    p.lse_in = a->lse_in;
    p.lse_in_state_stride = a->lse_in_state_stride;
    p.lse_in_row_stride = a->lse_in_row_stride;
    p.out_dtype = static_cast<flashserve::DType>(a->out_dtype);
    p.o_out = a->o_out;
    p.o_out_row_stride = a->o_out_row_stride;
    p.lse_out = a->lse_out;
    p.lse_out_row_stride = a->lse_out_row_stride;
    return flashserve::merge_states(p, stream);
  });
}

int fs_cuda_sm_count(int32_t device, int32_t* out) {
  return guarded("fs_cuda_sm_count", [&] {
    if (out == nullptr) return flashserve::invalid_argument("fs_cuda_sm_count: out is null");
    flashserve::CudaDeviceInfo info;
    flashserve::Status st = flashserve::cuda_device_info(device, &info);
    if (st.ok()) *out = info.sm_count;
    return st;
  });
}

}  // extern "C"
