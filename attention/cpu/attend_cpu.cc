#include "attention/cpu/attend_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "attention/softmax_state.h"

namespace flashserve::cpu {

namespace {

// Per-thread scratch, grown on demand and reused across items.
struct Scratch {
  std::vector<float> q, o, k, v, s;
  std::vector<SoftmaxState> state;
  std::vector<int64_t> lo, hi;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

inline const char* key_row(const char* base, const KVRows& kv, int64_t j, int64_t packed_stride) {
  const int64_t elem = dtype_size(kv.dtype);
  if (!kv.paged) return base + j * packed_stride * elem;
  const int32_t block_size = kv.pages.block_size;
  return base + kv.pages.offset(kv.block_table[j / block_size], kv.kv_head, j % block_size) * elem;
}

// FP8 code -> float, every code's value (exact), one table a format.
struct Fp8Table {
  float e4m3[256], e5m2[256];
  Fp8Table() {
    for (int c = 0; c < 256; ++c) {
      e4m3[c] = fp8_e4m3_to_float(static_cast<uint8_t>(c));
      e5m2[c] = fp8_e5m2_to_float(static_cast<uint8_t>(c));
    }
  }
};
const Fp8Table& fp8_table() {
  static const Fp8Table t;
  return t;
}

// Inlined here (not dtype.cc's out-of-line one) so each target clone of attend_tile gets a
// vectorised copy.
inline void to_float(const void* src, DType t, int n, float* dst) {
  if (t == DType::kFloat32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  } else if (t == DType::kBFloat16) {
    const auto* s = static_cast<const uint16_t*>(src);
    for (int i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
  } else if (t == DType::kFloat16) {
    const auto* s = static_cast<const uint16_t*>(src);
    for (int i = 0; i < n; ++i) dst[i] = fp16_to_float(s[i]);
  } else {  // FP8: a table lookup a code
    const float* table = t == DType::kFp8E4M3 ? fp8_table().e4m3 : fp8_table().e5m2;
    const auto* s = static_cast<const uint8_t*>(src);
    for (int i = 0; i < n; ++i) dst[i] = table[s[i]];
  }
}

// exp(x) for x <= 0 (the softmax's s - m), written so that loops over it vectorise:
// x = n·ln2 + r with |r| <= ln2/2, exp(r) by its Taylor polynomial to r^6 (relative error
// below 2e-7, about one fp32 ulp), 2^n built in the exponent bits. Inputs below -87 give
// about 1e-38 instead of a denormal or 0: negligible against the row's largest weight, 1.
inline float dot(const float* a, const float* b, int n) {
  float acc = 0.f;
#pragma omp simd reduction(+ : acc)
  for (int i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float shifter = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + shifter) - shifter;
  const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;  // ln2 = hi + lo
  float p = 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}


}  // namespace

KVRows paged_kv_rows(const KVPageView& pages, int32_t seq, int32_t kv_head) {
  KVRows kv;
  kv.dtype = pages.dtype;
  if (is_fp8(pages.dtype)) {
    kv.k_scale = pages.k_scales[kv_head];
    kv.v_scale = pages.v_scales[kv_head];
  }
  kv.paged = true;
  kv.k = static_cast<const char*>(pages.k_pages);
  kv.v = static_cast<const char*>(pages.v_pages);
  kv.block_table = pages.block_table + seq * pages.block_table_stride;
  kv.pages = pages;
  kv.kv_head = kv_head;
  return kv;
}

void set_output(TileItem& it, DType dtype, void* o, int64_t o_row_stride, int64_t o_head_stride, float* lse,
                int32_t num_heads, int64_t row, int32_t first_head) {
  it.o_dtype = dtype;
  it.o = static_cast<char*>(o) + (row * o_row_stride + first_head * o_head_stride) * dtype_size(dtype);
  it.o_token_stride = o_row_stride;
  it.o_head_stride = o_head_stride;
  it.lse = lse ? lse + row * num_heads + first_head : nullptr;
  it.lse_token_stride = num_heads;
  it.lse_head_stride = 1;
}

// Two clones, picked at load time by the CPU's features: x86-64-v3 (AVX2, FMA, F16C) and the
// baseline. Measured on the 2-core EPYC build machine (bench_cpu, bf16, 32/8 heads, d 128):
// see bench/history/cpu.md, "CPU v1" -> "CPU v2".
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
void attend_tile(const TileItem& it, const KVRows& kv, const MaskParams& mask) {
  const int D = it.head_dim;
  const int rows = it.num_tokens * it.group;
  Scratch& sc = scratch();
  sc.q.resize(static_cast<size_t>(rows) * D);
  sc.o.assign(static_cast<size_t>(rows) * D, 0.f);
  sc.k.resize(static_cast<size_t>(kTileK) * D);
  sc.v.resize(static_cast<size_t>(kTileK) * D);
  sc.s.resize(kTileK);
  sc.state.assign(rows, SoftmaxState{});
  sc.lo.resize(it.num_tokens);
  sc.hi.resize(it.num_tokens);

  // Queries to fp32, and each token's visible range (the same for every head of the group).
  const int64_t elem = dtype_size(it.q_dtype);
  const char* qbase = static_cast<const char*>(it.q);
  int64_t tile_lo = it.k_end, tile_hi = it.k_begin;
  for (int t = 0; t < it.num_tokens; ++t) {
    for (int g = 0; g < it.group; ++g) {
      const char* src = qbase + (t * it.q_token_stride + g * it.q_head_stride) * elem;
      to_float(src, it.q_dtype, D, &sc.q[(static_cast<size_t>(t) * it.group + g) * D]);
    }
    visible_keys(mask, it.q_pos0 + t, it.k_begin, it.k_end, &sc.lo[t], &sc.hi[t]);
    if (sc.lo[t] < sc.hi[t]) {
      tile_lo = std::min(tile_lo, sc.lo[t]);
      tile_hi = std::max(tile_hi, sc.hi[t]);
    }
  }

  const float scale = mask.softmax_scale * kv.k_scale;  // FP8: K's scale folded in (else 1)
  const bool softcap = mask.softcap > 0.f;
  const float inv_cap = softcap ? 1.f / mask.softcap : 0.f;

  for (int64_t j0 = tile_lo; j0 < tile_hi; j0 += kTileK) {
    const int n = static_cast<int>(std::min<int64_t>(kTileK, tile_hi - j0));
    for (int c = 0; c < n; ++c) {
      to_float(key_row(kv.k, kv, j0 + c, kv.k_row_stride), kv.dtype, D, &sc.k[static_cast<size_t>(c) * D]);
      to_float(key_row(kv.v, kv, j0 + c, kv.v_row_stride), kv.dtype, D, &sc.v[static_cast<size_t>(c) * D]);
    }
    for (int t = 0; t < it.num_tokens; ++t) {
      const int c0 = static_cast<int>(std::max<int64_t>(sc.lo[t] - j0, 0));
      const int c1 = static_cast<int>(std::min<int64_t>(sc.hi[t] - j0, n));
      if (c0 >= c1) continue;
      const int64_t q_pos = it.q_pos0 + t;
      for (int g = 0; g < it.group; ++g) {
        const size_t r = static_cast<size_t>(t) * it.group + g;
        const float* qr = &sc.q[r * D];
        float* s = sc.s.data();
        const float slope = mask.alibi_slopes ? mask.alibi_slopes[it.first_head + g] : 0.f;
        float m_tile = -INFINITY;
        for (int c = c0; c < c1; ++c) {
          float x = dot(qr, &sc.k[static_cast<size_t>(c) * D], D) * scale;
          if (softcap) x = mask.softcap * std::tanh(x * inv_cap);
          if (slope != 0.f) x -= slope * static_cast<float>(std::llabs(q_pos - (j0 + c)));
          s[c] = x;
          m_tile = std::max(m_tile, x);
        }
        SoftmaxState& st = sc.state[r];
        float* orow = &sc.o[r * D];
        const float m_new = std::max(st.m, m_tile);
        const float f = st.rescale_to(m_new);
        if (f != 1.f) {
          for (int d = 0; d < D; ++d) orow[d] *= f;
        }
        float sum = 0.f;
#pragma omp simd reduction(+ : sum)
        for (int c = c0; c < c1; ++c) {
          s[c] = exp_nonpositive(s[c] - m_new);
          sum += s[c];
        }
        for (int c = c0; c < c1; ++c) {
          const float p = s[c];
          const float* vr = &sc.v[static_cast<size_t>(c) * D];
#pragma omp simd
          for (int d = 0; d < D; ++d) orow[d] += p * vr[d];
        }
        st.d += sum;
      }
    }
  }

  // Normalise once and store.
  const int64_t oelem = dtype_size(it.o_dtype);
  char* obase = static_cast<char*>(it.o);
  for (int t = 0; t < it.num_tokens; ++t) {
    for (int g = 0; g < it.group; ++g) {
      const size_t r = static_cast<size_t>(t) * it.group + g;
      const SoftmaxState& st = sc.state[r];
      float* orow = &sc.o[r * D];
      const float inv = st.d > 0.f ? kv.v_scale / st.d : 0.f;  // FP8: V's scale applied once
      for (int d = 0; d < D; ++d) orow[d] *= inv;
      convert_from_float(orow, it.o_dtype, D,
                         obase + (t * it.o_token_stride + g * it.o_head_stride) * oelem);
      if (it.lse) it.lse[t * it.lse_token_stride + g * it.lse_head_stride] = st.lse();
    }
  }
}

}  // namespace flashserve::cpu
