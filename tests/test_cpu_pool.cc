// CpuKVPool: tokens written through a slot mapping are what paged prefill reads.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "attention/prefill.h"
#include "kvcache/cpu_pool.h"

namespace flashserve {
namespace {

TEST(CpuKVPool, WrittenTokensAreReadBackThroughTheView) {
  const int H = 2, D = 16, bs = 4;
  CpuKVPool pool;
  ASSERT_TRUE(CpuKVPool::create(10, H, bs, D, DType::kFloat32, &pool).ok());
  // One sequence of 9 tokens in blocks 7, 2, 5 (scattered).
  const std::vector<int32_t> table = {7, 2, 5};
  std::vector<int64_t> slots(9);
  for (int j = 0; j < 9; ++j) slots[j] = int64_t{table[j / bs]} * bs + j % bs;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> k(9 * H * D), v(9 * H * D), q(H * D);
  for (auto* vec : {&k, &v, &q})
    for (auto& x : *vec) x = normal(rng);
  ASSERT_TRUE(pool.write(slots.data(), 9, k.data(), v.data()).ok());

  // Paged prefill of the last token equals packed prefill over k, v.
  const int32_t seq_len = 9;
  const int32_t cu_q[2] = {0, 1}, cu_k[2] = {0, 9};
  std::vector<float> o_paged(H * D), o_packed(H * D), lse_a(H), lse_b(H);
  PrefillParams p;
  p.dtype = DType::kFloat32;
  p.batch = 1;
  p.num_heads = H;
  p.num_kv_heads = H;
  p.head_dim = D;
  p.q = q.data();
  p.cu_seqlens_q = cu_q;
  p.total_q = 1;
  p.mask.softmax_scale = 0.25f;
  p.mask.causal = true;
  p.o = o_paged.data();
  p.lse = lse_a.data();
  set_contiguous_strides(p);
  p.paged = true;
  p.pages = pool.view(table.data(), 3, &seq_len);
  ASSERT_TRUE(prefill(p).ok());
  p.paged = false;
  p.k = k.data();
  p.v = v.data();
  p.cu_seqlens_k = cu_k;
  p.total_k = 9;
  p.o = o_packed.data();
  p.lse = lse_b.data();
  ASSERT_TRUE(prefill(p).ok());
  EXPECT_EQ(o_paged, o_packed);
  EXPECT_EQ(lse_a, lse_b);
}

TEST(CpuKVPool, RejectsBadSlotsWithoutWriting) {
  CpuKVPool pool;
  ASSERT_TRUE(CpuKVPool::create(2, 1, 4, 8, DType::kBFloat16, &pool).ok());
  std::vector<uint16_t> k(2 * 8, 0x3f80), v(2 * 8, 0x3f80);  // 1.0 in bf16
  const int64_t slots[2] = {3, 8};                          // 8 = 2 blocks × 4: out of range
  const Status st = pool.write(slots, 2, k.data(), v.data());
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("slots[1] = 8"), std::string::npos) << st.message();
  // Slot 3 was not written either.
  const auto* kp = static_cast<const uint16_t*>(pool.k_pages());
  EXPECT_EQ(kp[3 * 8], 0);
  EXPECT_EQ(CpuKVPool::create(0, 1, 4, 8, DType::kBFloat16, &pool).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flashserve
