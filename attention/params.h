// Parameters of the prefill family: varlen (packed, unpadded) queries attending to keys and
// values that are either packed too or in pages of the KV cache. Plain data, usable on host
// and device; pointers live where the kernel runs (params.device). Strides count elements
// and are 64-bit; the last dimension (head_dim) is always contiguous.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/dtype.h"
#include "common/host_device.h"
#include "kvcache/page_view.h"

namespace flashserve {

// How a score becomes a logit, and which keys a query may see. Shared by prefill and decode.
//
// Positions: query i of a sequence with q_len queries and k_len keys sits at key position
//     q_pos = k_len - q_len + i        (bottom-right alignment: the queries are the last
//                                       q_len tokens of the sequence)
// Key j is visible to query i when
//     (!causal || j <= q_pos) && (window_left < 0 || j >= q_pos - window_left)
//                             && (window_right < 0 || j <= q_pos + window_right).
// The logit of a visible key: s = (q·k)·softmax_scale; if softcap > 0,
// s = softcap·tanh(s / softcap); then s -= alibi_slopes[head]·|q_pos - j| when slopes are
// given. A row with no visible key has output 0 and lse = -inf.
struct MaskParams {
  float softmax_scale = 0.f;          // usually 1/sqrt(head_dim)
  bool causal = false;
  int32_t window_left = -1;           // -1: unlimited
  int32_t window_right = -1;          // -1: unlimited (causal implies 0)
  const float* alibi_slopes = nullptr;  // [num_heads] fp32, or null for none
  float softcap = 0.f;                // 0: off
};

// The rule above as a range: the keys [*lo, *hi) within [k_begin, k_end) that the query at
// q_pos sees (empty: *hi == *lo). The one statement of it: the CPU kernels and the CUDA kernels
// call this.
FS_HOST_DEVICE void visible_keys(const MaskParams& m, int64_t q_pos, int64_t k_begin, int64_t k_end, int64_t* lo,
                                 int64_t* hi) {
#if defined(__CUDA_ARCH__)
  using ::max;
  using ::min;
#else
  using std::max;
  using std::min;
#endif
  *lo = k_begin;
  *hi = k_end;
  if (m.window_left >= 0) *lo = max(*lo, q_pos - m.window_left);
  if (m.causal) *hi = min(*hi, q_pos + 1);
  if (m.window_right >= 0) *hi = min(*hi, q_pos + m.window_right + 1);
  if (*hi < *lo) *hi = *lo;
}

struct PrefillParams {
  Device device = Device::kCPU;
  DType dtype = DType::kBFloat16;  // storage type of q, k, v, o (accumulation is fp32)

  int32_t batch = 0;         // sequences in the packed batch
  int32_t num_heads = 0;     // query heads
  int32_t num_kv_heads = 0;  // key/value heads; num_heads % num_kv_heads == 0 (GQA/MQA)
  int32_t head_dim = 0;

  // Queries, packed: sequence b owns rows cu_seqlens_q[b] .. cu_seqlens_q[b+1]-1.
  const void* q = nullptr;               // [total_q, num_heads, head_dim]
  int64_t q_row_stride = 0;              // elements between token t and t+1
  int64_t q_head_stride = 0;             // elements between head h and h+1
  const int32_t* cu_seqlens_q = nullptr; // [batch + 1], 0 = first <= ... <= last = total_q
  int64_t total_q = 0;                   // rows of q, o and lse
  int32_t max_seqlen_q = 0;              // CUDA: the longest q_len (sizes the grid; rows past it
                                         // are not computed). The CPU reads cu_seqlens_q.

  // Keys and values: packed (paged == false) ...
  bool paged = false;
  const void* k = nullptr;               // [total_k, num_kv_heads, head_dim]
  const void* v = nullptr;               // [total_k, num_kv_heads, head_dim]
  int64_t k_row_stride = 0, k_head_stride = 0;
  int64_t v_row_stride = 0, v_head_stride = 0;
  const int32_t* cu_seqlens_k = nullptr; // [batch + 1], like cu_seqlens_q
  int64_t total_k = 0;                   // rows of k and v. Paged: a hint, the sum of seq_lens
                                         // where the host knows it, else 0 (CUDA picks its key
                                         // tile by it; never read as a bound)
  // ... or in pages (paged == true): sequence b has pages.seq_lens[b] keys, of which its
  // q_len queries are the last ones (a prompt chunk attends to its cached prefix), so
  // seq_lens[b] >= q_len.
  KVPageView pages;

  MaskParams mask;

  // Outputs.
  void* o = nullptr;                     // [total_q, num_heads, head_dim], dtype
  int64_t o_row_stride = 0, o_head_stride = 0;
  float* lse = nullptr;                  // [total_q, num_heads] fp32, natural log; may be null
};

// Fills the strides of contiguous [tokens, heads, head_dim] tensors (q, k, v, o).
void set_contiguous_strides(PrefillParams& p);

}  // namespace flashserve
