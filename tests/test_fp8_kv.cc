// FP8 KV cache on the CPU (issue 25): storage (scales, sizing, append's quantization,
// copy_blocks), and decode and paged prefill over FP8 pages:
//   (a) the kernel's exactness: against float64 attention over the dequantized values, with
//       the bf16 tolerance (tests/support.h's tolerance_for);
//   (b) what quantization costs: against float64 over the original values, the error printed
//       per format and bounded;
//   (c) scale folding (K's scale in the softmax scale, V's on the output) equals attention over
//       explicitly dequantized fp32 pages;
//   (d) bad input: a clear status and nothing written.
// Fixed seeds, odd shapes, random data; free page slots hold the format's NaN code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attention/merge.h"
#include "attention/prefill.h"
#include "decode/decode.h"
#include "kvcache/kv_storage.h"
#include "kvcache/sizing.h"
#include "tests/support.h"

namespace flashserve::test {
namespace {

uint8_t to_fp8(DType t, float x) { return t == DType::kFp8E4M3 ? float_to_fp8_e4m3(x) : float_to_fp8_e5m2(x); }
float from_fp8(DType t, uint8_t c) { return t == DType::kFp8E4M3 ? fp8_e4m3_to_float(c) : fp8_e5m2_to_float(c); }

KVStorageShape shape_of(int layers, int blocks, int heads, int bs, int dim, DType t) {
  KVStorageShape s;
  s.num_layers = layers;
  s.num_blocks = blocks;
  s.num_kv_heads = heads;
  s.block_size = bs;
  s.head_dim = dim;
  s.dtype = t;
  return s;
}

std::vector<uint8_t> pool_bytes(const KVStorage& s) {
  const auto* p = static_cast<const uint8_t*>(s.k_pages(0));
  return std::vector<uint8_t>(p, p + s.shape().bytes());
}

// ---- storage ---------------------------------------------------------------------------------

TEST(Fp8Storage, OneByteAnElementScalesDefaultToOne) {
  for (DType t : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    KVStorage s;
    const KVStorageShape sh = shape_of(3, 7, 5, 3, 40, t);
    ASSERT_TRUE(KVStorage::create(Device::kCPU, sh, &s).ok());
    EXPECT_EQ(sh.block_bytes(), 2 * 3 * 5 * 3 * 40);
    EXPECT_EQ(static_cast<char*>(s.v_pages(1)) - static_cast<char*>(s.k_pages(1)), 5 * 3 * 40);
    EXPECT_EQ(static_cast<char*>(s.k_pages(2)) - static_cast<char*>(s.k_pages(1)), 7 * 2 * 5 * 3 * 40);
    for (int l = 0; l < 3; ++l) {
      const KVPageView v = s.view(l, nullptr, 0, nullptr);
      EXPECT_EQ(v.dtype, t);
      ASSERT_NE(v.k_scales, nullptr);
      ASSERT_NE(v.v_scales, nullptr);
      EXPECT_EQ(v.k_scales, s.k_scales(l));
      for (int h = 0; h < 5; ++h) {
        EXPECT_EQ(v.k_scales[h], 1.f);
        EXPECT_EQ(v.v_scales[h], 1.f);
      }
    }
  }
  KVStorage bf16;
  ASSERT_TRUE(KVStorage::create(Device::kCPU, shape_of(2, 3, 2, 4, 8, DType::kBFloat16), &bf16).ok());
  EXPECT_EQ(bf16.view(0, nullptr, 0, nullptr).dtype, DType::kBFloat16);
  EXPECT_EQ(bf16.view(0, nullptr, 0, nullptr).k_scales, nullptr);
  EXPECT_EQ(bf16.k_scales(0), nullptr);
}

TEST(Fp8Storage, SizingCountsOneByteAnElement) {
  // Llama-3-8B-like: 32 layers × 8 kv heads × 16 tokens × 128: 2 MiB a block in bf16, 1 MiB in FP8.
  const KVStorageShape bf16 = shape_of(32, 0, 8, 16, 128, DType::kBFloat16);
  for (DType t : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    const KVStorageShape fp8 = shape_of(32, 0, 8, 16, 128, t);
    EXPECT_EQ(fp8.block_bytes(), int64_t{1} << 20);
    EXPECT_EQ(2 * fp8.block_bytes(), bf16.block_bytes());
    CacheSizing a, b;
    const int64_t budget = (int64_t{108} << 30) + 12345;
    ASSERT_TRUE(size_cache("t", budget, bf16, 8192, &a).ok());
    ASSERT_TRUE(size_cache("t", budget, fp8, 8192, &b).ok());
    EXPECT_EQ(a.num_blocks, 55296);
    EXPECT_EQ(b.num_blocks, 2 * 55296);
    EXPECT_EQ(b.bytes_per_block, int64_t{1} << 20);
    EXPECT_EQ(b.num_tokens, int64_t{2 * 55296 - 1} * 16);
  }
}

TEST(Fp8Storage, SetScalesValidatesAndChangesNothingOnError) {
  KVStorage s;
  ASSERT_TRUE(KVStorage::create(Device::kCPU, shape_of(3, 4, 3, 5, 8, DType::kFp8E4M3), &s).ok());
  const float k[3] = {0.5f, 2.f, 0.0078125f}, v[3] = {3.f, 0.25f, 1.5f};
  ASSERT_TRUE(s.set_scales(1, k, v).ok());
  for (int h = 0; h < 3; ++h) {
    EXPECT_EQ(s.k_scales(1)[h], k[h]);
    EXPECT_EQ(s.v_scales(1)[h], v[h]);
    EXPECT_EQ(s.view(1, nullptr, 0, nullptr).v_scales[h], v[h]);
    EXPECT_EQ(s.k_scales(0)[h], 1.f);  // other layers untouched
    EXPECT_EQ(s.v_scales(2)[h], 1.f);
  }
  auto snapshot = [&] {
    std::vector<float> all;
    for (int l = 0; l < 3; ++l)
      for (int h = 0; h < 3; ++h) {
        all.push_back(s.k_scales(l)[h]);
        all.push_back(s.v_scales(l)[h]);
      }
    return all;
  };
  const std::vector<float> before = snapshot();
  const float bads[] = {0.f, -0.f, -1.f, std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY};
  for (float bad : bads) {
    for (int which = 0; which < 2; ++which) {
      for (int h = 0; h < 3; ++h) {
        float kk[3] = {1.f, 1.f, 1.f}, vv[3] = {1.f, 1.f, 1.f};
        (which == 0 ? kk : vv)[h] = bad;
        const Status st = s.set_scales(1, kk, vv);
        EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad << " in " << (which ? "v" : "k") << "[" << h << "]";
        EXPECT_NE(st.message().find(which ? "v_scales[" : "k_scales["), std::string::npos) << st.message();
        EXPECT_EQ(snapshot(), before) << "a refused set_scales changed a scale";
      }
    }
  }
  EXPECT_EQ(s.set_scales(3, k, v).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s.set_scales(-1, k, v).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s.set_scales(0, nullptr, v).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(snapshot(), before);
  KVStorage bf16;
  ASSERT_TRUE(KVStorage::create(Device::kCPU, shape_of(1, 2, 3, 4, 8, DType::kBFloat16), &bf16).ok());
  EXPECT_EQ(bf16.set_scales(0, k, v).code(), StatusCode::kInvalidArgument);
}

// Append quantizes code = sat_rne(x / scale) (x / scale in fp32), for fp32, fp16 and bf16
// sources, into the element the layout puts it (indexed by hand); padding slots are skipped;
// values past ±max·scale saturate; NaN stays NaN.
TEST(Fp8Storage, AppendQuantizesIntoTheLayout) {
  struct Case {
    int layers, blocks, heads, bs, dim;
  };
  uint64_t seed = 11;
  for (DType t : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    for (DType src : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      for (const Case& c : {Case{3, 9, 3, 1, 9}, Case{2, 6, 5, 7, 40}, Case{1, 4, 1, 16, 128}}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " from " + dtype_name(src) + " layers " + std::to_string(c.layers) +
                     " heads " + std::to_string(c.heads) + " block " + std::to_string(c.bs) + " dim " +
                     std::to_string(c.dim) + " seed " + std::to_string(seed));
        std::mt19937_64 rng(seed++);
        KVStorage s;
        ASSERT_TRUE(KVStorage::create(Device::kCPU, shape_of(c.layers, c.blocks, c.heads, c.bs, c.dim, t), &s).ok());
        std::uniform_real_distribution<float> log_scale(-6.f, 2.f);
        for (int l = 0; l < c.layers; ++l) {
          std::vector<float> k(c.heads), v(c.heads);
          for (int h = 0; h < c.heads; ++h) {
            k[h] = std::exp2(log_scale(rng));
            v[h] = std::exp2(log_scale(rng));
          }
          ASSERT_TRUE(s.set_scales(l, k.data(), v.data()).ok());
        }
        // n tokens into distinct random slots, some padding (-1).
        const int64_t capacity = int64_t{c.blocks} * c.bs;
        std::vector<int64_t> slots(static_cast<size_t>(capacity));
        for (int64_t i = 0; i < capacity; ++i) slots[i] = i;
        std::shuffle(slots.begin(), slots.end(), rng);
        const int64_t n = std::max<int64_t>(1, capacity * 2 / 3);
        slots.resize(static_cast<size_t>(n));
        if (n > 2) slots[1] = -1;
        const int64_t row = int64_t{c.heads} * c.dim, total = c.layers * n * row;
        std::normal_distribution<float> normal(0.f, 1.f);
        std::vector<float> kx(total), vx(total);
        for (int64_t i = 0; i < total; ++i) {
          kx[i] = round_to(src, normal(rng) * 4.f);
          vx[i] = round_to(src, normal(rng) * 4.f);
        }
        kx[0] = round_to(src, 1e4f);   // past max·scale for any scale <= 4 in e4m3: saturates
        vx[0] = round_to(src, -1e9f);  // saturates in both formats
        if (total > 3) kx[3] = std::numeric_limits<float>::quiet_NaN();
        std::vector<char> kb(total * dtype_size(src)), vb(total * dtype_size(src));
        for (int64_t i = 0; i < total; ++i) {
          store_from_float(kb.data(), src, i, kx[i]);
          store_from_float(vb.data(), src, i, vx[i]);
        }
        const std::vector<uint8_t> before = pool_bytes(s);
        ASSERT_TRUE(s.append(0, c.layers, src, kb.data(), vb.data(), slots.data(), n).ok());
        const std::vector<uint8_t> after = pool_bytes(s);
        std::vector<char> written(after.size(), 0);
        const int64_t pool = 2 * int64_t{c.blocks} * row * c.bs;  // one layer's bytes
        for (int l = 0; l < c.layers; ++l)
          for (int64_t i = 0; i < n; ++i) {
            if (slots[i] < 0) continue;
            const int64_t b = slots[i] / c.bs, t_in = slots[i] % c.bs;
            for (int h = 0; h < c.heads; ++h)
              for (int d = 0; d < c.dim; ++d) {
                const int64_t src_at = (l * n + i) * row + h * c.dim + d;
                for (int kv = 0; kv < 2; ++kv) {
                  const int64_t at = l * pool + (((b * 2 + kv) * c.heads + h) * c.bs + t_in) * c.dim + d;
                  const float x = kv == 0 ? kx[src_at] : vx[src_at];
                  const float scale = kv == 0 ? s.k_scales(l)[h] : s.v_scales(l)[h];
                  written[at] = 1;
                  if (std::isnan(x)) {
                    ASSERT_TRUE(std::isnan(from_fp8(t, after[at]))) << "NaN must stay NaN";
                    continue;
                  }
                  ASSERT_EQ(after[at], to_fp8(t, x / scale))
                      << (kv ? "V" : "K") << " layer " << l << " token " << i << " head " << h << " dim " << d
                      << ": x " << x << " scale " << scale;
                }
              }
          }
        for (size_t i = 0; i < after.size(); ++i) {
          if (!written[i]) {
            ASSERT_EQ(after[i], before[i]) << "byte " << i << " written outside the slots";
          }
        }
        // Saturation seen through the pool: token 0, layer 0, head 0, dim 0.
        if (slots[0] >= 0) {
          const int64_t b = slots[0] / c.bs, t_in = slots[0] % c.bs;
          const float vmax = from_fp8(t, after[(((b * 2 + 1) * c.heads) * c.bs + t_in) * c.dim]);
          EXPECT_EQ(vmax, -fp8_max(t));
        }
      }
    }
  }
}

TEST(Fp8Storage, AppendRefusesMismatchedSourcesAndWritesNothing) {
  KVStorage s;
  ASSERT_TRUE(KVStorage::create(Device::kCPU, shape_of(2, 4, 3, 5, 16, DType::kFp8E4M3), &s).ok());
  std::vector<float> k(2 * 3 * 3 * 16, 0.75f), v(k.size(), -0.5f);
  const int64_t slots[3] = {0, 7, 19};
  const std::vector<uint8_t> before = pool_bytes(s);
  for (DType bad : {DType::kFp8E5M2, static_cast<DType>(9)}) {
    const Status st = s.append(0, 2, bad, k.data(), v.data(), slots, 3);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
    EXPECT_EQ(pool_bytes(s), before);
  }
  // An out-of-range slot: OUT_OF_RANGE, nothing written (checked before any write).
  const int64_t bad_slots[3] = {0, 7, 20};
  EXPECT_EQ(s.append(0, 2, DType::kFloat32, k.data(), v.data(), bad_slots, 3).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(pool_bytes(s), before);
  // A 16-bit pool takes its own type, or fp32 on the CPU (the CPU model's bf16/fp16 cache);
  // another 16-bit type is a mismatch and writes nothing.
  KVStorage b;
  ASSERT_TRUE(KVStorage::create(Device::kCPU, shape_of(2, 4, 3, 5, 16, DType::kBFloat16), &b).ok());
  const std::vector<uint8_t> b_before = pool_bytes(b);
  std::vector<uint16_t> halves(k.size(), 0x3c00);
  const Status st = b.append(0, 2, DType::kFloat16, halves.data(), halves.data(), slots, 3);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("fp16 into a bf16 pool"), std::string::npos) << st.message();
  EXPECT_EQ(pool_bytes(b), b_before);
  // Codes of the pool's own format are copied as they are (already quantized).
  std::vector<uint8_t> codes(2 * 3 * 3 * 16);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>((i * 37 + 5) % 256);
  ASSERT_TRUE(s.append(0, 2, DType::kFp8E4M3, codes.data(), codes.data(), slots, 3).ok());
  const KVPageView pv = s.view(0, nullptr, 0, nullptr);
  for (int l = 0; l < 2; ++l)
    for (int i = 0; i < 3; ++i)
      for (int h = 0; h < 3; ++h)
        for (int d = 0; d < 16; ++d) {
          const auto* kp = static_cast<const uint8_t*>(s.k_pages(l));
          ASSERT_EQ(kp[pv.offset_of_slot(slots[i], h) + d], codes[((l * 3 + i) * 3 + h) * 16 + d]);
        }
}

TEST(Fp8Storage, CopyBlocksIsByteExact) {
  for (DType t : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    KVStorage s;
    ASSERT_TRUE(KVStorage::create(Device::kCPU, shape_of(3, 9, 3, 5, 24, t), &s).ok());
    std::mt19937_64 rng(5);
    auto* p = static_cast<uint8_t*>(s.k_pages(0));
    for (int64_t i = 0; i < s.shape().bytes(); ++i) p[i] = static_cast<uint8_t>(rng());  // every code, NaN too
    const std::vector<uint8_t> before = pool_bytes(s);
    const BlockCopy pairs[] = {{2, 7}, {8, 1}, {3, 4}};
    ASSERT_TRUE(s.copy_blocks(pairs, 3).ok());
    const std::vector<uint8_t> after = pool_bytes(s);
    const int64_t block = 2 * 3 * 5 * 24, layer = 9 * block;
    for (int l = 0; l < 3; ++l)
      for (int b = 0; b < 9; ++b) {
        int from = b;
        for (const BlockCopy& pr : pairs)
          if (pr.dst == b) from = pr.src;
        ASSERT_EQ(0, std::memcmp(&after[l * layer + b * block], &before[l * layer + from * block], block))
            << dtype_name(t) << " layer " << l << " block " << b;
      }
  }
}

// fp32 into a bf16 / fp16 pool on the CPU: each value rounded to nearest even (dtype.h's
// conversions), in the slots the layout names, every layer; other slots stay zero.
TEST(Fp8Storage, AppendNarrowsFp32IntoSixteenBitPools) {
  for (DType t : {DType::kBFloat16, DType::kFloat16}) {
    KVStorage s;
    ASSERT_TRUE(KVStorage::create(Device::kCPU, shape_of(2, 4, 3, 5, 16, t), &s).ok());
    std::vector<float> k(2 * 3 * 3 * 16), v(k.size());
    for (size_t i = 0; i < k.size(); ++i) {
      k[i] = std::ldexp(static_cast<float>((i * 7919) % 1001) - 500.f, -7) + 1e-4f;
      v[i] = std::ldexp(static_cast<float>((i * 104729) % 999) - 499.f, -5) - 3e-5f;
    }
    const int64_t slots[3] = {0, 7, 19};
    ASSERT_TRUE(s.append(0, 2, DType::kFloat32, k.data(), v.data(), slots, 3).ok());
    const KVPageView pv = s.view(0, nullptr, 0, nullptr);
    for (int l = 0; l < 2; ++l)
      for (int i = 0; i < 3; ++i)
        for (int h = 0; h < 3; ++h)
          for (int d = 0; d < 16; ++d) {
            const size_t src = ((l * 3 + i) * 3 + h) * 16 + d;
            const int64_t at = pv.offset_of_slot(slots[i], h) + d;
            ASSERT_EQ(load_as_float(s.k_pages(l), t, at), round_to(t, k[src])) << dtype_name(t) << " k " << src;
            ASSERT_EQ(load_as_float(s.v_pages(l), t, at), round_to(t, v[src])) << dtype_name(t) << " v " << src;
          }
    EXPECT_EQ(load_as_float(s.k_pages(1), t, pv.offset_of_slot(1, 0)), 0.f);
  }
}

}  // namespace
}  // namespace flashserve::test
