// KVStorage on the CPU: tokens appended through a slot mapping are what paged prefill reads;
// copy-on-write through copy_blocks leaves the parent's block unchanged; bad slots and ids are
// errors that write nothing; cache sizing from a budget or the device's memory (pure arithmetic).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "attention/prefill.h"
#include "kvcache/kv_cache_manager.h"
#include "kvcache/kv_storage.h"
#include "kvcache/page_view_check.h"
#include "kvcache/sizing.h"

namespace flashserve {
namespace {

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

KVStorageShape shape(int layers, int blocks, int heads, int bs, int dim, DType t) {
  KVStorageShape s;
  s.num_layers = layers;
  s.num_blocks = blocks;
  s.num_kv_heads = heads;
  s.block_size = bs;
  s.head_dim = dim;
  s.dtype = t;
  return s;
}

// The layout [num_blocks, 2, num_kv_heads, block_size, head_dim], indexed by hand: element
// (block, kv, head, slot, dim), kv 0 for K and 1 for V, of one layer's pool.
int64_t layout_index(int64_t block, int kv, int head, int slot, int dim, int heads, int bs, int head_dim) {
  return (((block * 2 + kv) * heads + head) * bs + slot) * head_dim + dim;
}

TEST(KVPageView, OffsetIsTheLayoutComputedIndependently) {
  struct Shape {
    int blocks, heads, bs, dim;
    DType dtype;
    int elem() const { return dtype_size(dtype); }
  };
  for (const Shape& sh : {Shape{1, 1, 1, 1, DType::kBFloat16}, Shape{7, 3, 5, 9, DType::kFloat16},
                          Shape{13, 8, 16, 128, DType::kBFloat16}, Shape{5, 2, 256, 64, DType::kFloat32},
                          Shape{300000, 8, 16, 128, DType::kBFloat16}, Shape{7, 3, 5, 9, DType::kFp8E4M3},
                          Shape{1, 1, 1, 1, DType::kFp8E5M2}}) {
    SCOPED_TRACE("blocks " + std::to_string(sh.blocks) + " heads " + std::to_string(sh.heads) + " block_size " +
                 std::to_string(sh.bs) + " head_dim " + std::to_string(sh.dim));
    static char pool[1];
    const KVPageView pv = make_page_view(pool, sh.dtype, sh.blocks, sh.heads, sh.bs, sh.dim, nullptr, 0, nullptr);
    EXPECT_EQ(pv.dtype, sh.dtype);
    const int64_t v_shift = (static_cast<const char*>(pv.v_pages) - static_cast<const char*>(pv.k_pages)) / sh.elem();
    EXPECT_EQ((static_cast<const char*>(pv.v_pages) - static_cast<const char*>(pv.k_pages)) % sh.elem(), 0);
    std::mt19937 rng(77);
    for (int i = 0; i < 2000; ++i) {
      const int64_t b = std::uniform_int_distribution<int64_t>(0, sh.blocks - 1)(rng);
      const int h = std::uniform_int_distribution<int>(0, sh.heads - 1)(rng);
      const int t = std::uniform_int_distribution<int>(0, sh.bs - 1)(rng);
      const int64_t k_at = layout_index(b, 0, h, t, 0, sh.heads, sh.bs, sh.dim);
      ASSERT_EQ(pv.offset(b, h, t), k_at) << "block " << b << " head " << h << " slot " << t;
      ASSERT_EQ(v_shift + pv.offset(b, h, t), layout_index(b, 1, h, t, 0, sh.heads, sh.bs, sh.dim));
      ASSERT_EQ(pv.offset_of_slot(b * sh.bs + t, h), k_at);
    }
  }
  // Another strided layout (token-major pages, K and V pools apart): the view's strides decide.
  KVPageView pv;
  pv.block_size = 16;
  pv.token_stride = 8 * 128;  // [blocks, block_size, heads, head_dim]
  pv.head_stride = 128;
  pv.block_stride = 16 * 8 * 128;
  EXPECT_EQ(pv.offset(70000, 5, 11), ((70000LL * 16 + 11) * 8 + 5) * 128);
  EXPECT_EQ(pv.offset_of_slot(70000LL * 16 + 11, 5), ((70000LL * 16 + 11) * 8 + 5) * 128);
}

// Append and copy-on-write against the layout indexed by hand on the storage's memory (not
// through the view, which the kernels read with): every element written where it belongs,
// nothing else touched.
TEST(KVStorage, AppendAndCopyWriteWhereTheLayoutSays) {
  const int L = 3, blocks = 11, H = 3, bs = 5, D = 6, n = 17;
  KVStorage st;
  ASSERT_TRUE(KVStorage::create(Device::kCPU, shape(L, blocks, H, bs, D, DType::kFloat32), &st).ok());
  std::vector<int64_t> slots(n);
  std::mt19937 rng(26);
  std::vector<int64_t> free_slots(blocks * bs);
  for (int64_t i = 0; i < blocks * bs; ++i) free_slots[i] = i;
  std::shuffle(free_slots.begin(), free_slots.end(), rng);
  for (int i = 0; i < n; ++i) slots[i] = free_slots[i];
  slots[4] = -1;  // padding
  const std::vector<float> k = randn(static_cast<size_t>(2) * n * H * D, 5), v = randn(static_cast<size_t>(2) * n * H * D, 6);
  ASSERT_TRUE(st.append(1, 2, k.data(), v.data(), slots.data(), n).ok());  // layers 1 and 2
  // The expected pools: zero except the appended tokens.
  const int64_t pool = static_cast<int64_t>(blocks) * 2 * H * bs * D;
  std::vector<float> want(static_cast<size_t>(L) * pool, 0.f);
  for (int l = 1; l < L; ++l)
    for (int i = 0; i < n; ++i) {
      if (slots[i] < 0) continue;
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < D; ++d) {
          const size_t src = ((static_cast<size_t>(l - 1) * n + i) * H + h) * D + d;
          want[l * pool + layout_index(slots[i] / bs, 0, h, static_cast<int>(slots[i] % bs), d, H, bs, D)] = k[src];
          want[l * pool + layout_index(slots[i] / bs, 1, h, static_cast<int>(slots[i] % bs), d, H, bs, D)] = v[src];
        }
    }
  auto check = [&](const char* what) {
    for (int l = 0; l < L; ++l) {
      const float* got = static_cast<const float*>(st.k_pages(l));
      for (int64_t e = 0; e < pool; ++e)
        ASSERT_EQ(got[e], want[l * pool + e]) << what << ": layer " << l << " element " << e;
    }
  };
  check("append");
  // Copy-on-write: block src's K and V (every head, every layer) into dst, the others untouched.
  const int64_t src_block = slots[0] / bs, dst_block = (src_block + 3) % blocks;
  const BlockCopy pair{static_cast<int32_t>(src_block), static_cast<int32_t>(dst_block)};
  ASSERT_TRUE(st.copy_blocks(&pair, 1).ok());
  for (int l = 0; l < L; ++l)
    for (int kv = 0; kv < 2; ++kv)
      for (int h = 0; h < H; ++h)
        for (int t = 0; t < bs; ++t)
          for (int d = 0; d < D; ++d)
            want[l * pool + layout_index(dst_block, kv, h, t, d, H, bs, D)] =
                want[l * pool + layout_index(src_block, kv, h, t, d, H, bs, D)];
  check("copy_blocks");
}

TEST(KVStorage, AppendedTokensAreReadBackThroughTheView) {
  const int H = 2, D = 16, bs = 4, L = 3;
  KVStorage st;
  ASSERT_TRUE(KVStorage::create(Device::kCPU, shape(L, 10, H, bs, D, DType::kFloat32), &st).ok());
  // One sequence of 9 tokens in blocks 7, 2, 5 (scattered); all three layers in one call.
  const std::vector<int32_t> table = {7, 2, 5};
  std::vector<int64_t> slots(9);
  for (int j = 0; j < 9; ++j) slots[j] = int64_t{table[j / bs]} * bs + j % bs;
  const std::vector<float> k = randn(L * 9 * H * D, 1), v = randn(L * 9 * H * D, 2), q = randn(H * D, 3);
  ASSERT_TRUE(st.append(0, L, k.data(), v.data(), slots.data(), 9).ok());

  // Paged prefill of the last token of layer 2 equals packed prefill over that layer's k, v.
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
  p.pages = st.view(2, table.data(), 3, &seq_len);
  ASSERT_TRUE(prefill(p).ok());
  p.paged = false;
  p.k = k.data() + 2 * 9 * H * D;
  p.v = v.data() + 2 * 9 * H * D;
  p.cu_seqlens_k = cu_k;
  p.total_k = 9;
  p.o = o_packed.data();
  p.lse = lse_b.data();
  ASSERT_TRUE(prefill(p).ok());
  EXPECT_EQ(o_paged, o_packed);
  EXPECT_EQ(lse_a, lse_b);
}

TEST(KVStorage, PaddingSlotsAreSkippedAndBadSlotsWriteNothing) {
  KVStorage st;
  ASSERT_TRUE(KVStorage::create(Device::kCPU, shape(1, 2, 1, 4, 8, DType::kBFloat16), &st).ok());
  std::vector<uint16_t> k(2 * 8, 0x3f80), v(2 * 8, 0x3f80);  // 1.0 in bf16
  const int64_t pad[2] = {-1, 5};
  ASSERT_TRUE(st.append(0, 1, k.data(), v.data(), pad, 2).ok());
  const auto* kp = static_cast<const uint16_t*>(st.k_pages(0));
  EXPECT_EQ(kp[(1 * 2 * 4 + 1) * 8], 0x3f80);  // slot 5: block 1 (after block 0's K and V), slot 1
  EXPECT_EQ(kp[(1 * 2 * 4 + 4 + 1) * 8], 0x3f80);  // its V
  EXPECT_EQ(kp[0], 0);
  const int64_t slots[2] = {3, 8};  // 8 = 2 blocks × 4: out of range
  const Status s = st.append(0, 1, k.data(), v.data(), slots, 2);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("slots[1] = 8"), std::string::npos) << s.message();
  EXPECT_EQ(kp[3 * 8], 0);  // slot 3 was not written either
  EXPECT_EQ(st.append(1, 1, k.data(), v.data(), pad, 2).code(), StatusCode::kOutOfRange);  // no layer 1
  EXPECT_EQ(KVStorage::create(Device::kCPU, shape(1, 0, 1, 4, 8, DType::kBFloat16), &st).code(),
            StatusCode::kInvalidArgument);
}

// fork, then the child appends into the shared partly filled block: the manager asks for a
// copy, the storage makes it, and the parent's block keeps its contents in every layer.
TEST(KVStorage, CopyOnWriteLeavesTheParentUnchanged) {
  const int H = 2, D = 8, bs = 4, L = 2;
  KVCacheConfig cfg;
  cfg.num_blocks = 16;
  cfg.block_size = bs;
  KVCacheManager mgr(cfg);
  KVStorage st;
  ASSERT_TRUE(KVStorage::create(Device::kCPU, shape(L, 16, H, bs, D, DType::kFloat32), &st).ok());
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10};  // 1.5 blocks
  int32_t cached = -1;
  ASSERT_TRUE(mgr.add_sequence(1, prompt.data(), 6, 0, &cached).ok());
  std::vector<int64_t> slots;
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(mgr.allocate_slots(1, prompt, 6, &slots, &copies).ok());
  ASSERT_TRUE(copies.empty());
  const std::vector<float> k = randn(L * 6 * H * D, 4), v = randn(L * 6 * H * D, 5);
  ASSERT_TRUE(st.append(0, L, k.data(), v.data(), slots.data(), 6).ok());

  ASSERT_TRUE(mgr.fork(1, 2).ok());
  const int32_t parent_last = mgr.block_table(1)->back();
  const int64_t block_stride = st.view(1, nullptr, 0, nullptr).block_stride;  // a block's K and V
  ASSERT_EQ(block_stride, 2 * st.shape().block_elems());
  std::vector<float> before(static_cast<size_t>(block_stride));
  std::copy_n(static_cast<const float*>(st.k_pages(1)) + parent_last * block_stride, before.size(), before.begin());

  std::vector<int32_t> child = prompt;  // the child's tokens, then its new one
  child.push_back(11);
  slots.clear();
  ASSERT_TRUE(mgr.allocate_slots(2, child, 1, &slots, &copies).ok());
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, parent_last);
  EXPECT_NE(mgr.block_table(2)->back(), parent_last);
  ASSERT_TRUE(st.copy_blocks(copies.data(), 1).ok());
  const std::vector<float> k1 = randn(L * H * D, 6), v1 = randn(L * H * D, 7);
  ASSERT_TRUE(st.append(0, L, k1.data(), v1.data(), slots.data(), 1).ok());

  const float* parent_block = static_cast<const float*>(st.k_pages(1)) + parent_last * block_stride;
  EXPECT_TRUE(std::equal(before.begin(), before.end(), parent_block)) << "the parent's block changed";
  // The child's copy holds the parent's two tokens plus its own third, K and V.
  const int32_t child_last = mgr.block_table(2)->back();
  const float* child_block = static_cast<const float*>(st.k_pages(1)) + child_last * block_stride;
  for (int kv = 0; kv < 2; ++kv)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < 2; ++t)
        for (int d = 0; d < D; ++d) {
          const int64_t at = ((kv * H + h) * bs + t) * D + d;
          EXPECT_EQ(child_block[at], parent_block[at]);
        }
  EXPECT_EQ(child_block[(0 * bs + 2) * D + 0], k1[(1 * 1 + 0) * H * D + 0]);  // layer 1, token 0, head 0
  EXPECT_EQ(child_block[(H * bs + 2) * D + 0], v1[(1 * 1 + 0) * H * D + 0]);  // and its V
  EXPECT_EQ(st.copy_blocks(std::vector<BlockCopy>{{1, 99}}.data(), 1).code(), StatusCode::kOutOfRange);
}

// What the CUDA kernels need of a page view, checked on the host: 16-byte chunks, a
// power-of-two block size, in-pool offsets of a block and of a token that fit 32 bits (the
// K/V tile copier's address math), and rows of fewer than 2^31 keys.
TEST(PageViewCuda, AlignmentBlockSizeAndThirtyTwoBitOffsets) {
  alignas(16) static uint16_t pool[2 * 8 * 16 * 128];  // one block's K and V: V's pointer lies inside
  static int32_t table[4], lens[1];
  KVPageView pv = make_page_view(pool, DType::kBFloat16, 4, 8, 16, 128, table, 4, lens);
  EXPECT_TRUE(validate_page_view_cuda("t", pv, 2).ok());
  KVPageView bad = pv;
  bad.k_pages = pool + 1;  // 2 bytes off a 16-byte boundary
  EXPECT_EQ(validate_page_view_cuda("t", bad, 2).code(), StatusCode::kInvalidArgument);
  bad = pv;
  bad.token_stride = 132;  // 264 bytes: not whole 16-byte chunks
  EXPECT_EQ(validate_page_view_cuda("t", bad, 2).code(), StatusCode::kInvalidArgument);
  bad = pv;
  bad.block_size = 12;
  EXPECT_EQ(validate_page_view_cuda("t", bad, 2).code(), StatusCode::kUnsupported);
  bad = pv;
  bad.block_stride = int64_t{1} << 31;  // 4 GiB a block at 2 bytes an element
  EXPECT_EQ(validate_page_view_cuda("t", bad, 2).code(), StatusCode::kUnsupported);
  bad.block_stride = (int64_t{1} << 31) - 8;  // just under 4 GiB: fine
  EXPECT_TRUE(validate_page_view_cuda("t", bad, 2).ok());
  bad = pv;
  bad.token_stride = int64_t{1} << 27;  // 16 tokens × 256 MiB = 4 GiB
  EXPECT_EQ(validate_page_view_cuda("t", bad, 2).code(), StatusCode::kUnsupported);
  bad = pv;
  bad.block_table_stride = int64_t{1} << 27;  // 2^27 pages of 16 keys: 2^31 keys a row
  EXPECT_EQ(validate_page_view_cuda("t", bad, 2).code(), StatusCode::kUnsupported);
}

// Llama-3-8B's pool: 32 layers, 8 kv heads, head_dim 128, bf16, 16 tokens a block = 2 MiB.
const KVStorageShape kLlama3 = shape(32, 0, 8, 16, 128, DType::kBFloat16);
constexpr int64_t kGiB = int64_t{1} << 30, kBlock = int64_t{2} << 20;

TEST(CacheSizing, BlocksFromABudget) {
  CacheSizing s;
  ASSERT_TRUE(size_cache("t", 10 * kGiB, kLlama3, 8192, &s).ok());
  EXPECT_EQ(s.bytes_per_block, 2 * 32 * 8 * 16 * 128 * 2);
  EXPECT_EQ(s.block_size, 16);
  EXPECT_EQ(s.num_blocks, 5120);
  EXPECT_EQ(s.num_tokens, 5119 * 16);
  EXPECT_EQ(s.bytes, 10 * kGiB);
  EXPECT_EQ(describe(s), "5120 blocks of 16 tokens (81904 tokens, 10.00 GiB)");
  ASSERT_TRUE(size_cache("t", 10 * kGiB - 1, kLlama3, 8192, &s).ok());  // floor: one byte short, one block less
  EXPECT_EQ(s.num_blocks, 5119);
  EXPECT_EQ(size_cache("t", 1000, kLlama3, 1, &s).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(size_cache("t", 0, kLlama3, 1, &s).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(size_cache("t", -kGiB, kLlama3, 1, &s).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(size_cache("t", kGiB, shape(0, 0, 8, 16, 128, DType::kBFloat16), 1, &s).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(size_cache("t", kGiB, kLlama3, 0, &s).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(size_cache("t", kGiB * kGiB, kLlama3, 1, &s).code(), StatusCode::kOk);  // 2^39 blocks: capped
  EXPECT_EQ(s.num_blocks, INT32_MAX);
}

// One sequence of the context length must fit beside the null block: 131072 tokens in blocks of
// 16 are 8192 blocks, 8193 with the null block.
TEST(CacheSizing, RefusesAPoolThatCannotHoldTheContext) {
  CacheSizing s;
  ASSERT_TRUE(size_cache("t", 8193 * kBlock, kLlama3, 131072, &s).ok());
  EXPECT_EQ(s.num_blocks, 8193);
  EXPECT_EQ(s.num_tokens, 131072);
  s = CacheSizing{};
  const Status st = size_cache("--kv-cache-memory 17179869184", 8192 * kBlock, kLlama3, 131072, &s);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "--kv-cache-memory 17179869184: a KV cache of 16.00 GiB holds 8192 blocks of 2.00 MiB (131056 tokens), but "
            "one sequence of the context length, 131072 tokens, needs 8193 blocks with the null block (16.00 GiB)");
  EXPECT_EQ(s.num_blocks, 0) << "a refusal leaves *out alone";
  // A context of one token needs two blocks (the null block and one).
  EXPECT_EQ(size_cache("t", 2 * kBlock - 1, kLlama3, 1, &s).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(size_cache("t", 2 * kBlock, kLlama3, 1, &s).ok());
}

// --gpu-memory-utilization: blocks = floor((utilization · total − (total − free)) / block bytes).
TEST(CacheSizing, FromTheDeviceMemory) {
  // The example of sizing.h: 140 GiB at 0.9 allow 126 GiB; 18 GiB in use leave 108 GiB, 55,296
  // blocks of 2 MiB, 884,720 tokens. own_bytes only goes into the messages.
  DeviceMemory m;
  m.total_bytes = 140 * kGiB;
  m.free_bytes = 122 * kGiB;
  m.own_bytes = 15 * kGiB;
  CacheSizing s;
  ASSERT_TRUE(size_cache_for_utilization("t", 0.9, m, kLlama3, 131072, &s).ok());
  EXPECT_EQ(s.num_blocks, 55296);
  EXPECT_EQ(s.num_tokens, 884720);
  EXPECT_EQ(s.bytes, 108 * kGiB);
  EXPECT_EQ(describe(m), "140.00 GiB, 18.00 GiB in use (15.00 GiB weights and buffers, 3.00 GiB CUDA context and others)");
  m.free_bytes -= 1;  // one byte more in use: one block less
  ASSERT_TRUE(size_cache_for_utilization("t", 0.9, m, kLlama3, 131072, &s).ok());
  EXPECT_EQ(s.num_blocks, 55295);
  ASSERT_TRUE(size_cache_for_utilization("t", 1.0, m, kLlama3, 131072, &s).ok());  // all that is free
  EXPECT_EQ(s.num_blocks, 122 * kGiB / kBlock - 1);
  m.own_bytes = 0;  // others' memory counts as much as ours
  ASSERT_TRUE(size_cache_for_utilization("t", 0.9, m, kLlama3, 131072, &s).ok());
  EXPECT_EQ(s.num_blocks, 55295);

  // Everything allowed is in use already: refused, saying what holds it.
  m = DeviceMemory{140 * kGiB, 12 * kGiB, 120 * kGiB};
  Status st = size_cache_for_utilization("--gpu-memory-utilization 0.9", 0.9, m, kLlama3, 131072, &s);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "--gpu-memory-utilization 0.9 allows 126.00 GiB of the device's 140.00 GiB, but 128.00 GiB in use (120.00 "
            "GiB weights and buffers, 8.00 GiB CUDA context and others): nothing is left for the KV cache");
  // Something left, but not one sequence of the context: refused as size_cache refuses.
  m = DeviceMemory{140 * kGiB, 14 * kGiB + 8192 * kBlock, 100 * kGiB};  // a pool of 8192 blocks
  st = size_cache_for_utilization("--gpu-memory-utilization 0.9", 0.9, m, kLlama3, 131072, &s);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("--gpu-memory-utilization 0.9: a KV cache of 16.00 GiB holds 8192 blocks"), std::string::npos)
      << st.message();
  ASSERT_TRUE(size_cache_for_utilization("t", 0.9, m, kLlama3, 8191 * 16, &s).ok());  // 8191 blocks and the null one
  EXPECT_EQ(s.num_blocks, 8192);

  // Utilizations outside (0, 1] and impossible memory figures are INVALID_ARGUMENT.
  m = DeviceMemory{140 * kGiB, 122 * kGiB, 15 * kGiB};
  for (double u : {0.0, -0.0, -0.5, 1.5, 1.0000001, std::nan(""), double{INFINITY}, -double{INFINITY}})
    EXPECT_EQ(size_cache_for_utilization("t", u, m, kLlama3, 1, &s).code(), StatusCode::kInvalidArgument) << u;
  for (const DeviceMemory& bad : {DeviceMemory{0, 0, 0}, DeviceMemory{kGiB, 2 * kGiB, 0}, DeviceMemory{kGiB, -1, 0},
                                  DeviceMemory{kGiB, 0, -1}})
    EXPECT_EQ(size_cache_for_utilization("t", 0.9, bad, kLlama3, 1, &s).code(), StatusCode::kInvalidArgument);
}

// What a storage holds, for the log.
TEST(CacheSizing, OfAStorageShape) {
  const CacheSizing s = cache_sizing(shape(2, 1024, 2, 16, 32, DType::kFloat32));
  EXPECT_EQ(s.bytes_per_block, 2 * 2 * 2 * 16 * 32 * 4);
  EXPECT_EQ(s.num_tokens, 1023 * 16);
  EXPECT_EQ(describe(s), "1024 blocks of 16 tokens (16368 tokens, 16.00 MiB)");
  EXPECT_EQ(s.bytes, shape(2, 1024, 2, 16, 32, DType::kFloat32).bytes());
}

}  // namespace
}  // namespace flashserve
