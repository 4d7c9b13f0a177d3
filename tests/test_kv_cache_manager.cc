// The block pool and the cache manager: a randomized property test against a simple model
// (thousands of add / allocate / fork / free / evict / prefix-match steps), and unit tests of
// each rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "kvcache/kv_cache_manager.h"

namespace flashserve {
namespace {

KVCacheConfig config(int blocks, int bs, bool prefix = true, int max_per_seq = 0) {
  KVCacheConfig c;
  c.num_blocks = blocks;
  c.block_size = bs;
  c.enable_prefix_caching = prefix;
  c.max_blocks_per_seq = max_per_seq;
  return c;
}

// The model: what each slot holds (the token id written there), applied like a real storage.
struct Model {
  std::map<int64_t, int32_t> slot_token;  // slot -> token id whose K/V it holds
  void write(const std::vector<int64_t>& slots, const std::vector<int32_t>& toks) {
    for (size_t i = 0; i < slots.size(); ++i) slot_token[slots[i]] = toks[i];
  }
  void copy(const std::vector<BlockCopy>& copies, int bs) {
    for (const BlockCopy& c : copies)
      for (int o = 0; o < bs; ++o) {
        auto it = slot_token.find(int64_t{c.src} * bs + o);
        if (it != slot_token.end()) slot_token[int64_t{c.dst} * bs + o] = it->second;
        else slot_token.erase(int64_t{c.dst} * bs + o);
      }
  }
};

// Every invariant the manager promises, checked against the model. tokens: each live sequence's
// token ids (the caller's; the manager keeps none).
void check_invariants(const KVCacheManager& m, const Model& model, const std::map<int64_t, std::vector<int32_t>>& tokens) {
  const BlockPool& pool = m.pool();
  const int bs = m.config().block_size;
  std::vector<int> owners(static_cast<size_t>(pool.num_blocks()), 0);
  for (const auto& [id, toks] : tokens) {
    const auto* table = m.block_table(id);
    ASSERT_NE(table, nullptr);
    std::set<int32_t> seen;
    for (int32_t b : *table) {
      ASSERT_GT(b, 0) << "the null block in a table";
      ASSERT_LT(b, pool.num_blocks());
      ASSERT_TRUE(seen.insert(b).second) << "block " << b << " twice in sequence " << id;
      ++owners[b];
    }
    // Every slotted token's slot holds that token (prefix hits and copies included).
    const int32_t n = m.num_slotted_tokens(id);
    ASSERT_LE(static_cast<size_t>((n + bs - 1) / bs), table->size());
    for (int32_t j = 0; j < n; ++j) {
      const int64_t slot = int64_t{(*table)[j / bs]} * bs + j % bs;
      auto it = model.slot_token.find(slot);
      ASSERT_TRUE(it != model.slot_token.end()) << "sequence " << id << " token " << j << " has no contents";
      ASSERT_EQ(it->second, toks[j]) << "sequence " << id << " token " << j << " reads another token's K/V";
    }
  }
  int free_count = 0;
  for (int32_t b = 1; b < pool.num_blocks(); ++b) {
    ASSERT_EQ(pool.ref_count(b), owners[b]) << "block " << b;
    free_count += owners[b] == 0;
  }
  ASSERT_EQ(pool.num_free(), free_count);
}

TEST(KVCacheManager, RandomizedAgainstModel) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    const int bs = 1 << std::uniform_int_distribution<int>(0, 4)(rng);  // 1..16
    KVCacheManager m(config(64, bs));
    Model model;
    std::map<int64_t, std::vector<int32_t>> live;  // id -> its tokens
    int64_t next_id = 1;
    // A few shared prompt stems so that prefix hits happen.
    std::vector<std::vector<int32_t>> stems(4);
    for (auto& s : stems) {
      s.resize(std::uniform_int_distribution<int>(1, 5 * bs)(rng));
      for (auto& t : s) t = std::uniform_int_distribution<int>(0, 50)(rng);
    }
    int hits = 0, exhausted = 0, cows = 0;
    for (int step = 0; step < 3000; ++step) {
      const int op = std::uniform_int_distribution<int>(0, 9)(rng);
      if (op <= 2 || live.empty()) {  // a new sequence
        std::vector<int32_t> prompt = stems[std::uniform_int_distribution<int>(0, 3)(rng)];
        const int extra = std::uniform_int_distribution<int>(0, 3 * bs)(rng);
        for (int i = 0; i < extra; ++i) prompt.push_back(std::uniform_int_distribution<int>(0, 50)(rng));
        int32_t cached = -1;
        ASSERT_TRUE(m.add_sequence(next_id, prompt.data(), static_cast<int32_t>(prompt.size()), 0, &cached).ok());
        ASSERT_EQ(cached % bs, 0);
        ASSERT_LT(cached, static_cast<int32_t>(prompt.size()));
        hits += cached > 0;
        live[next_id++] = prompt;
      } else if (op <= 6) {  // slots for a prompt chunk or a generated token
        auto it = live.begin();
        std::advance(it, std::uniform_int_distribution<int>(0, static_cast<int>(live.size()) - 1)(rng));
        const int64_t id = it->first;
        std::vector<int32_t>& toks = it->second;
        const int32_t pending = static_cast<int32_t>(toks.size()) - m.num_slotted_tokens(id);
        std::vector<int64_t> slots;
        std::vector<BlockCopy> copies;
        const int32_t free_before = m.pool().num_free();
        const std::vector<int32_t> table_before = *m.block_table(id);
        std::vector<int32_t> written;
        Status st;
        if (pending > 0) {
          const int32_t n = std::uniform_int_distribution<int>(1, pending)(rng);
          written.assign(toks.begin() + m.num_slotted_tokens(id), toks.begin() + m.num_slotted_tokens(id) + n);
          const bool can = m.can_allocate(id, n);
          st = m.allocate_slots(id, toks, n, &slots, &copies);
          ASSERT_EQ(can, st.ok()) << st.to_string();
        } else {  // a generated token: the caller appends it, then asks for its slot
          const int32_t tok = std::uniform_int_distribution<int>(0, 50)(rng);
          written = {tok};
          toks.push_back(tok);
          st = m.allocate_slots(id, toks, 1, &slots, &copies);
          if (!st.ok()) toks.pop_back();  // not generated after all
        }
        if (st.code() == StatusCode::kResourceExhausted || st.code() == StatusCode::kOutOfRange) {
          ++exhausted;
          ASSERT_EQ(m.pool().num_free(), free_before) << "a failed allocation changed the pool";
          ASSERT_EQ(*m.block_table(id), table_before);
          ASSERT_TRUE(slots.empty());
        } else {
          ASSERT_TRUE(st.ok()) << st.to_string();
          cows += !copies.empty();
          model.copy(copies, bs);  // copy-on-write before the step writes
          model.write(slots, written);
        }
      } else if (op == 7) {  // fork
        const int64_t parent = live.rbegin()->first;
        ASSERT_TRUE(m.fork(parent, next_id).ok());
        live[next_id] = live[parent];
        ++next_id;
      } else {  // free
        auto it = live.begin();
        std::advance(it, std::uniform_int_distribution<int>(0, static_cast<int>(live.size()) - 1)(rng));
        ASSERT_TRUE(m.free_sequence(it->first).ok());
        live.erase(it);
      }
      check_invariants(m, model, live);
      if (HasFatalFailure()) return;
    }
    for (const auto& [id, toks] : live) ASSERT_TRUE(m.free_sequence(id).ok());
    EXPECT_EQ(m.pool().num_free(), m.pool().num_usable()) << "blocks leaked";
    EXPECT_GT(hits, 0) << "the test never hit the prefix cache (seed " << seed << ")";
    EXPECT_GT(exhausted, 0) << "the test never ran out of blocks (seed " << seed << ")";
    EXPECT_GT(cows, 0) << "the test never copied on write (seed " << seed << ")";
    EXPECT_GT(m.stats().evictions, 0) << "the test never evicted (seed " << seed << ")";
  }
}

TEST(KVCacheManager, PrefixHitReusesFullBlocksOnly) {
  KVCacheManager m(config(32, 4));
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // 2 full blocks + 2
  int32_t cached;
  ASSERT_TRUE(m.add_sequence(1, a.data(), 10, 0, &cached).ok());
  EXPECT_EQ(cached, 0);
  std::vector<int64_t> slots;
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(m.allocate_slots(1, a, 10, &slots, &copies).ok());
  // Same first 9 tokens: 2 blocks hit. Same 8 tokens exactly: only 1 (one token must remain).
  std::vector<int32_t> b(a.begin(), a.begin() + 9);
  ASSERT_TRUE(m.add_sequence(2, b.data(), 9, 0, &cached).ok());
  EXPECT_EQ(cached, 8);
  EXPECT_EQ((*m.block_table(2))[0], (*m.block_table(1))[0]);
  std::vector<int32_t> c(a.begin(), a.begin() + 8);
  ASSERT_TRUE(m.add_sequence(3, c.data(), 8, 0, &cached).ok());
  EXPECT_EQ(cached, 4);
  // Another extra key (model, adapter) never hits.
  ASSERT_TRUE(m.add_sequence(4, a.data(), 10, 77, &cached).ok());
  EXPECT_EQ(cached, 0);
  // A different first block breaks the chain even if the second matches.
  std::vector<int32_t> d = a;
  d[0] = 99;
  ASSERT_TRUE(m.add_sequence(5, d.data(), 10, 0, &cached).ok());
  EXPECT_EQ(cached, 0);
  EXPECT_EQ(m.stats().prefix_hits, 8 + 4);
  EXPECT_EQ(m.stats().prefix_queries, 10 + 9 + 8 + 10 + 10);
}

TEST(KVCacheManager, FreedBlocksStayCachedUntilEvictedLeastRecentlyUsedFirst) {
  KVCacheManager m(config(5, 2));  // 4 usable blocks
  std::vector<int64_t> slots;
  std::vector<BlockCopy> copies;
  const std::vector<int32_t> p1 = {1, 2, 3, 4, 5}, p2 = {6, 7, 8, 9, 10};
  int32_t cached;
  ASSERT_TRUE(m.add_sequence(1, p1.data(), 5, 0, &cached).ok());
  ASSERT_TRUE(m.allocate_slots(1, p1, 4, &slots, &copies).ok());  // 2 full blocks
  ASSERT_TRUE(m.free_sequence(1).ok());
  EXPECT_EQ(m.pool().num_free(), 4);
  ASSERT_TRUE(m.add_sequence(2, p1.data(), 5, 0, &cached).ok());
  EXPECT_EQ(cached, 4) << "freed blocks must stay cached";
  ASSERT_TRUE(m.free_sequence(2).ok());
  // Fill the pool with other tokens: the cached blocks are evicted, the tail one first.
  ASSERT_TRUE(m.add_sequence(3, p2.data(), 5, 0, &cached).ok());
  slots.clear();
  ASSERT_TRUE(m.allocate_slots(3, p2, 5, &slots, &copies).ok());  // 3 blocks
  ASSERT_TRUE(m.add_sequence(4, p1.data(), 5, 0, &cached).ok());
  EXPECT_EQ(cached, 2) << "the first block (freed last) survives; the second was evicted";
  EXPECT_GE(m.stats().evictions, 1);
}

TEST(KVCacheManager, ErrorsAreStatusesNotCrashes) {
  KVCacheManager m(config(8, 4, true, 2));  // at most 2 blocks a sequence
  const std::vector<int32_t> p = {1, 2, 3};
  int32_t cached;
  std::vector<int64_t> slots;
  std::vector<BlockCopy> copies;
  EXPECT_EQ(m.add_sequence(1, p.data(), 0, 0, &cached).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(m.add_sequence(1, p.data(), 3, 0, &cached).ok());
  EXPECT_EQ(m.add_sequence(1, p.data(), 3, 0, &cached).code(), StatusCode::kInvalidArgument);  // exists
  EXPECT_EQ(m.allocate_slots(1, p, 4, &slots, &copies).code(), StatusCode::kInvalidArgument);  // 3 known
  ASSERT_TRUE(m.allocate_slots(1, p, 3, &slots, &copies).ok());
  const std::vector<int32_t> more = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // p and 6 generated
  EXPECT_EQ(m.allocate_slots(1, more, 6, &slots, &copies).code(), StatusCode::kOutOfRange);  // past table end
  EXPECT_EQ(m.allocate_slots(9, more, 1, &slots, &copies).code(), StatusCode::kInvalidArgument);  // unknown
  EXPECT_EQ(m.free_sequence(9).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.fork(9, 10).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.fork(1, 1).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(m.free_sequence(1).ok());
  EXPECT_EQ(m.free_sequence(1).code(), StatusCode::kInvalidArgument);  // double free of a sequence

  BlockPool pool(4, 2, false);
  std::vector<int32_t> got;
  ASSERT_TRUE(pool.allocate(2, &got).ok());
  ASSERT_TRUE(pool.release(got.data(), 2).ok());
  EXPECT_EQ(pool.release(got.data(), 1).code(), StatusCode::kInvalidArgument);  // double free
  const int32_t bad[2] = {0, 4};
  EXPECT_EQ(pool.release(&bad[0], 1).code(), StatusCode::kOutOfRange);  // the null block
  EXPECT_EQ(pool.release(&bad[1], 1).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(pool.allocate(4, &got).code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE(config(1, 16).validate().ok());
  EXPECT_FALSE(config(8, 24).validate().ok());
}

TEST(KVCacheManager, SchedulerQuestions) {
  KVCacheManager m(config(4, 4));  // 3 usable blocks
  const std::vector<int32_t> p(9, 1);
  int32_t cached;
  ASSERT_TRUE(m.add_sequence(1, p.data(), 9, 0, &cached).ok());
  EXPECT_EQ(m.blocks_needed(1, 9), 3);
  EXPECT_TRUE(m.can_allocate(1, 9));
  EXPECT_FALSE(m.can_allocate(1, 13));
  EXPECT_EQ(m.blocks_needed(42, 1), -1);
  std::vector<int64_t> slots;
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(m.allocate_slots(1, p, 9, &slots, &copies).ok());
  EXPECT_NEAR(m.stats().usage(), 1.0, 1e-12);
  ASSERT_TRUE(m.free_sequence(1).ok());
  EXPECT_NEAR(m.stats().usage(), 0.0, 1e-12);
}

// A token with a slot before its id is known (allocate_slots' unknown: the engine's overlapped
// steps): the slot is given, the block it fills is not hashed (no prefix can match an id not yet
// known) until a later call's tokens hold it; without the allowance the short tokens are refused.
TEST(KVCacheManager, ABlockFilledByATokenNotYetKnownIsHashedOnceItIs) {
  KVCacheManager m(config(16, 4));
  std::vector<int32_t> toks = {10, 11, 12};
  ASSERT_TRUE(m.add_sequence(1, toks.data(), 3, 0, nullptr).ok());
  std::vector<int64_t> slots;
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(m.allocate_slots(1, toks, 3, &slots, &copies).ok());
  EXPECT_EQ(m.allocate_slots(1, toks, 1, &slots, &copies).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(m.allocate_slots(1, toks, 1, &slots, &copies, 1).ok());  // the 4th token, in flight
  EXPECT_EQ(m.num_slotted_tokens(1), 4);
  EXPECT_EQ(slots.size(), 4u);
  EXPECT_EQ(m.allocate_slots(1, toks, 1, &slots, &copies, 1).code(), StatusCode::kInvalidArgument)
      << "two tokens past the known ones with an allowance of one";
  const std::vector<int32_t> probe = {10, 11, 12, 13, 14};
  int32_t cached = -1;
  ASSERT_TRUE(m.add_sequence(2, probe.data(), 5, 0, &cached).ok());
  EXPECT_EQ(cached, 0) << "a block hashed before its last id was known";
  ASSERT_TRUE(m.free_sequence(2).ok());
  toks.push_back(13);  // the draw comes in
  ASSERT_TRUE(m.allocate_slots(1, toks, 0, &slots, &copies).ok());
  ASSERT_TRUE(m.add_sequence(3, probe.data(), 5, 0, &cached).ok());
  EXPECT_EQ(cached, 4);
}

}  // namespace
}  // namespace flashserve
