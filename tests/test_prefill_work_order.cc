// The warp-specialized prefill kernel's work orders (attention/cuda/prefill_work_order.h), on
// the host: every item once, in the order each promises, and the grid order's index as the
// inverse of its item (the varlen walk hands its items to the consumers by that index).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "attention/cuda/prefill_work_order.h"

namespace flashserve::cuda {
namespace {

TEST(PrefillWorkOrder, GridOrderVisitsEveryItemOnceLongestFirstAndIndexInvertsItem) {
  for (int num_m : {1, 3, 8}) {
    for (int pairs : {1, 5, 12, 33}) {
      for (int section : {1, 2, 5, 7, pairs}) {
        if (section > pairs) continue;
        const WsWorkOrder order{num_m, pairs, section};
        std::set<std::pair<int, int>> seen;
        int last_sec = -1, last_m = 0;
        for (int w = 0; w < num_m * pairs; ++w) {
          int m = -1, pair = -1;
          order.item(w, m, pair);
          const std::string at = "num_m " + std::to_string(num_m) + " pairs " + std::to_string(pairs) + " section " +
                                 std::to_string(section) + " w " + std::to_string(w);
          ASSERT_TRUE(m >= 0 && m < num_m && pair >= 0 && pair < pairs) << at;
          EXPECT_TRUE(seen.insert({m, pair}).second) << at;
          EXPECT_EQ(order.index(m, pair), w) << at;
          const int sec = pair / section;
          EXPECT_GE(sec, last_sec) << at;  // sections one after another
          if (sec == last_sec) EXPECT_LE(m, last_m) << at;  // q tiles longest first in a section
          last_sec = sec;
          last_m = m;
        }
        EXPECT_EQ(static_cast<int>(seen.size()), num_m * pairs);
      }
    }
  }
}

// The zigzag order: every item once (padding positions -1, one at most a section), each unit
// (positions 2u, 2u + 1) the same pair's i-th longest and i-th shortest q tile or two middle
// tiles, and every section starting a unit.
TEST(PrefillWorkOrder, ZigzagOrderVisitsEveryItemOnceInUnitsOfALongAndAShortTile) {
  for (int num_m : {1, 2, 3, 8, 9}) {
    for (int pairs : {1, 5, 12, 33}) {
      for (int section : {1, 2, 5, 7, pairs}) {
        if (section > pairs) continue;
        const WsWorkOrder order{num_m, pairs, section};
        const std::string at = "num_m " + std::to_string(num_m) + " pairs " + std::to_string(pairs) + " section " +
                               std::to_string(section);
        std::set<int> seen;
        int padding = 0;
        const int n_z = order.zig_items();
        EXPECT_GE(n_z, num_m * pairs) << at;
        EXPECT_EQ(n_z % 2, 0) << at;
        for (int z = 0; z < n_z; z += 2) {
          const int a = order.zig_index(z), b = order.zig_index(z + 1);
          ASSERT_GE(a, 0) << at << " z " << z;  // a unit's first position is an item
          ASSERT_LT(a, num_m * pairs) << at << " z " << z;
          EXPECT_TRUE(seen.insert(a).second) << at << " z " << z;
          if (b < 0) {
            ++padding;
            continue;
          }
          ASSERT_LT(b, num_m * pairs) << at << " z " << z;
          EXPECT_TRUE(seen.insert(b).second) << at << " z " << z + 1;
          int ma = -1, pa = -1, mb = -1, pb = -1;
          order.item(a, ma, pa);
          order.item(b, mb, pb);
          EXPECT_EQ(pa / section, pb / section) << at << " z " << z;  // a unit inside a section
          if (ma == mb) {  // two middle tiles (num_m odd) of two pairs
            EXPECT_EQ(num_m % 2, 1) << at << " z " << z;
            EXPECT_EQ(ma, num_m / 2) << at << " z " << z;
          } else {  // a pair's long and short tile, the i-th from each end
            EXPECT_EQ(pa, pb) << at << " z " << z;
            EXPECT_EQ(ma + mb, num_m - 1) << at << " z " << z;
            EXPECT_GT(ma, mb) << at << " z " << z;
          }
        }
        EXPECT_EQ(static_cast<int>(seen.size()), num_m * pairs) << at;
        // Padding where a section's items are odd, and only there.
        int odd_sections = 0;
        for (int first = 0; first < pairs; first += section)
          odd_sections += (std::min(section, pairs - first) * num_m) % 2;
        EXPECT_EQ(padding, odd_sections) << at;
      }
    }
  }
}

// The zigzag walk as the kernel's producer makes it: CTA c's claims from zig_first(c) by zig_next,
// each through zig_claim (past a padding position to the CTA's next unit, -1 at the end).
template <typename Visit>
void zig_walk(const WsWorkOrder& order, int c, int g, Visit visit) {
  const int end = order.zig_items();
  int z = WsWorkOrder::zig_first(c);
  for (int w = order.zig_claim(z, g, end); w >= 0; z = WsWorkOrder::zig_next(z, g), w = order.zig_claim(z, g, end))
    visit(w);
}

// The static walk over the zigzag order: CTA c of g takes positions 2c, 2c + 1, 2(c + g), ...
// (padding passed over), every item once over the grid, also where sections' items are odd; on
// causal rows of one length (q tile m of 128 rows holding m + 1 key tiles of 128) its CTAs' key
// tiles within a unit's of the mean (16x1k at d 128 on 132 CTAs: 63 to 72 tiles, the mean 69.8),
// where the round-robin walk over the grid order gave them 40 to 104.
TEST(PrefillWorkOrder, ZigzagWalkTakesEveryItemOnceAndBalancesCausalRows) {
  for (int g : {1, 2, 7, 132}) {
    for (const WsWorkOrder order : {WsWorkOrder{9, 20, 6}, WsWorkOrder{9, 21, 5}, WsWorkOrder{1, 3, 3},
                                    WsWorkOrder{4, 33, 7}}) {
      std::vector<int> hits(order.num_m * order.pairs, 0);
      for (int c = 0; c < g; ++c)
        zig_walk(order, c, g, [&](int w) {
          ASSERT_TRUE(w >= 0 && w < static_cast<int>(hits.size())) << w;
          ++hits[w];
        });
      for (size_t w = 0; w < hits.size(); ++w)
        EXPECT_EQ(hits[w], 1) << "g " << g << " num_m " << order.num_m << " pairs " << order.pairs << " w " << w;
    }
  }
  const int num_m = 8, pairs = 16 * 16, section = 16, g = 132;  // 16x1k, d 128, 8 MB sections
  const WsWorkOrder order{num_m, pairs, section};
  auto cta_tiles = [&](bool zig) {
    std::vector<int> tiles(g, 0);
    for (int c = 0; c < g; ++c) {
      if (zig) {
        zig_walk(order, c, g, [&](int w) {
          int m = -1, pair = -1;
          order.item(w, m, pair);
          tiles[c] += m + 1;
        });
      } else {
        for (int w = c; w < num_m * pairs; w += g) {
          int m = -1, pair = -1;
          order.item(w, m, pair);
          tiles[c] += m + 1;
        }
      }
    }
    return tiles;
  };
  const std::vector<int> zig = cta_tiles(true), rr = cta_tiles(false);
  const int total = pairs * num_m * (num_m + 1) / 2;
  EXPECT_EQ(std::accumulate(zig.begin(), zig.end(), 0), total);
  EXPECT_EQ(std::accumulate(rr.begin(), rr.end(), 0), total);
  EXPECT_LE(*std::max_element(zig.begin(), zig.end()), 72);
  EXPECT_GE(*std::min_element(zig.begin(), zig.end()), 63);  // 7 or 8 units of 9 tiles
  EXPECT_GE(*std::max_element(rr.begin(), rr.end()), 100);  // the sawtooth the zigzag replaces
}

// WsFastDiv: x / d exactly for 0 <= x < 2^31 and 1 <= d < 2^31 (the edges of each divisor's
// multiples, the range's ends, random dividends), and the fast work order item for item as the
// plain one with the pair's head and sequence.
TEST(PrefillWorkOrder, FastDivisionIsExactAndTheFastOrderIsTheOrder) {
  std::mt19937 rng(22);
  std::vector<int> divisors;
  for (int d = 1; d <= 300; ++d) divisors.push_back(d);
  for (int k = 2; k <= 30; ++k)
    for (int e : {-1, 0, 1}) divisors.push_back((1 << k) + e);
  for (int d : {1000003, 65537, 46341, 2147483647, 1073741823, 7 * 128, 176 * 3}) divisors.push_back(d);
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + static_cast<int>(rng() % 2147483647u));
  for (int d : divisors) {
    const WsFastDiv f(d);
    std::vector<int> xs = {0, 1, 2147483647, 2147483646, d - 1, d};
    if (d < 2147483647) xs.push_back(d + 1);
    for (int k : {2, 3, 1000, 123457}) {
      const int64_t m = static_cast<int64_t>(d) * k;
      if (m + 1 > 2147483647) continue;
      for (int64_t e = -1; e <= 1; ++e) xs.push_back(static_cast<int>(m + e));
    }
    for (int i = 0; i < 200; ++i) xs.push_back(static_cast<int>(rng() % 2147483648u));
    for (int x : xs) {
      if (x < 0) continue;
      const int q = f.div(x);
      ASSERT_EQ(q, x / d) << x << " / " << d;
      ASSERT_EQ(f.mod(x, q), x % d) << x << " % " << d;
    }
  }
  for (int num_m : {1, 3, 8}) {
    for (int pairs : {1, 5, 12, 33, 96}) {
      for (int section : {1, 2, 5, 7, pairs}) {
        if (section > pairs) continue;
        for (int heads : {1, 3, 16}) {
          const WsWorkOrder order{num_m, pairs, section};
          const WsWorkOrderFast fast(order, heads);
          for (int w = 0; w < num_m * pairs; ++w) {
            int m = -1, pair = -1, fm = -1, fpair = -1, h = -1, b = -1;
            order.item(w, m, pair);
            fast.item(w, fm, fpair, h, b);
            ASSERT_EQ(std::make_tuple(fm, fpair, h, b), std::make_tuple(m, pair, pair % heads, pair / heads))
                << "num_m " << num_m << " pairs " << pairs << " section " << section << " heads " << heads << " w " << w;
          }
        }
      }
    }
  }
}

// The kernel's prefix (a scan of ws_q_tiles), written plainly.
std::vector<int> tile_prefix(const std::vector<int>& q_lens, int block_m, int num_m) {
  std::vector<int> tiles(q_lens.size() + 1, 0);
  for (size_t b = 0; b < q_lens.size(); ++b) tiles[b + 1] = tiles[b] + ws_q_tiles(q_lens[b], block_m, num_m);
  return tiles;
}

// Checks the varlen order over one batch: each existing (sequence, head, q tile) exactly once,
// sequences in batch order, q tiles longest first in a (sequence, head section), the section's
// heads fastest, and the item's grid-order index mapping back to it. Returns the items.
int check_varlen(const std::vector<int>& q_lens, int heads, int block_m, int num_m, int section, const std::string& at) {
  const int batch = static_cast<int>(q_lens.size());
  const std::vector<int> tiles = tile_prefix(q_lens, block_m, num_m);
  const WsVarlenOrder order{tiles.data(), batch, heads, section};
  const WsWorkOrder grid{num_m, batch * heads, section};
  const int items = tiles[batch] * heads;
  std::set<std::tuple<int, int, int>> seen;
  int last_b = -1, last_sec = -1, last_m = 0, last_h = -1;
  for (int w = 0; w < items; ++w) {
    int m = -1, pair = -1;
    order.item(w, m, pair);
    const int b = pair / heads, h = pair % heads;
    const std::string where = at + " w " + std::to_string(w);
    if (!(b >= 0 && b < batch && m >= 0 && m < tiles[b + 1] - tiles[b])) {
      ADD_FAILURE() << where << ": item (b " << b << ", m " << m << ") does not exist";
      return items;
    }
    EXPECT_TRUE(seen.insert({b, h, m}).second) << where;
    EXPECT_GE(b, last_b) << where;
    const int sec = h / std::min(section, heads);
    if (b == last_b && sec == last_sec) {
      EXPECT_LE(m, last_m) << where;
      if (m == last_m) EXPECT_EQ(h, last_h + 1) << where;  // the section's heads fastest
    } else if (b == last_b) {
      EXPECT_GT(sec, last_sec) << where;
    }
    // The consumers take the item by its grid-order index.
    int gm = -1, gpair = -1;
    const int gw = grid.index(m, pair);
    if (gw < 0 || gw >= num_m * batch * heads) {
      ADD_FAILURE() << where << ": grid index " << gw << " out of range";
      return items;
    }
    grid.item(gw, gm, gpair);
    EXPECT_EQ(gm, m) << where;
    EXPECT_EQ(gpair, pair) << where;
    last_b = b;
    last_sec = sec;
    last_m = m;
    last_h = h;
  }
  int expected = 0;
  for (int b = 0; b < batch; ++b) expected += ws_q_tiles(q_lens[b], block_m, num_m) * heads;
  EXPECT_EQ(static_cast<int>(seen.size()), expected) << at;
  return items;
}

// A random batch's q lengths: zeros, single tokens, short ones (1..short_max) and, one in eight,
// long ones (1..5000).
std::vector<int> random_q_lens(std::mt19937& rng, int batch, int short_max) {
  std::vector<int> q_lens(batch);
  for (int& q : q_lens) {
    const unsigned kind = rng() % 8;
    q = kind == 0   ? 0
        : kind == 1 ? 1
        : kind == 7 ? 1 + static_cast<int>(rng() % 5000)
                    : 1 + static_cast<int>(rng() % static_cast<unsigned>(short_max));
  }
  return q_lens;
}

// A random varlen trial's shape, drawn in this order: the batch (1..max_batch every tenth trial,
// else 1..20), the heads (1..32), the q lengths (random_q_lens), the heads a section (1..heads + 3);
// the row tile by the trial (64, 128, 192).
struct VarlenTrial {
  int batch, heads, block_m;
  std::vector<int> q_lens;
  int max_q, section;
};
VarlenTrial random_varlen_trial(std::mt19937& rng, int trial, int max_batch, int short_max) {
  VarlenTrial t;
  t.batch = 1 + static_cast<int>(rng() % (trial % 10 == 0 ? max_batch : 20));
  t.heads = 1 + static_cast<int>(rng() % 32);
  t.block_m = trial % 3 == 0 ? 64 : (trial % 3 == 1 ? 128 : 192);
  t.q_lens = random_q_lens(rng, t.batch, short_max);
  t.max_q = *std::max_element(t.q_lens.begin(), t.q_lens.end());
  t.section = 1 + static_cast<int>(rng() % (t.heads + 3));
  return t;
}

// The varlen static walk as the kernel's producer makes it: CTA c of g at positions c, c + g, ...
// (the round robin) or, with zig, 2c, 2c + 1, 2(c + g), ... (zig_first, zig_next), while below
// the items.
template <typename Visit>
void varlen_walk(bool zig, int c, int g, int items, Visit visit) {
  for (int z = zig ? WsWorkOrder::zig_first(c) : c; z < items; z = zig ? WsWorkOrder::zig_next(z, g) : z + g) visit(z);
}

TEST(PrefillWorkOrder, VarlenOrderVisitsEveryExistingTileOnce) {
  std::mt19937 rng(2311);
  for (int trial = 0; trial < 300; ++trial) {
    const VarlenTrial t = random_varlen_trial(rng, trial, 300, 300);
    const int batch = t.batch, heads = t.heads, block_m = t.block_m, section = t.section;
    const std::vector<int>& q_lens = t.q_lens;
    // num_m as the kernel makes it from max_seqlen_q, and once from a max below the longest
    // sequence (its tiles past num_m are not computed, as in the grid order).
    int num_m = (std::max(1, t.max_q) + block_m - 1) / block_m;
    if (trial % 7 == 3) num_m = std::max(1, num_m / 2);
    const std::string at = "trial " + std::to_string(trial) + " batch " + std::to_string(batch) + " heads " +
                           std::to_string(heads) + " block_m " + std::to_string(block_m) + " num_m " +
                           std::to_string(num_m) + " section " + std::to_string(section);
    check_varlen(q_lens, heads, block_m, num_m, section, at);
    if (HasFailure()) return;
  }
}

// The varlen order's zigzag (the static walk over causal rows whose q lengths differ): every
// existing tile once; each unit (positions 2u, 2u + 1) inside one (sequence, head section) of m q
// tiles, where the section starts on an even position, one head's i-th longest and i-th shortest
// tile (indices adding up to m - 1) or two middle tiles (m odd); where it starts on an odd one (a
// section of odd items before it: no padding, the units shift by one), two tiles whose indices add
// up to m - 1 or m - 2. The kernel's walk (CTA c of g at positions 2c, 2c + 1, 2(c + g), ... while
// below the items, each through item) takes every existing tile once.
TEST(PrefillWorkOrder, VarlenZigzagVisitsEveryExistingTileOnceInUnitsOfALongAndAShortTile) {
  std::mt19937 rng(2312);
  for (int trial = 0; trial < 200; ++trial) {
    const VarlenTrial t = random_varlen_trial(rng, trial, 200, 700);
    const int batch = t.batch, heads = t.heads, block_m = t.block_m, section = t.section;
    const std::vector<int>& q_lens = t.q_lens;
    const int num_m = (std::max(1, t.max_q) + block_m - 1) / block_m;
    const std::string at = "trial " + std::to_string(trial) + " batch " + std::to_string(batch) + " heads " +
                           std::to_string(heads) + " block_m " + std::to_string(block_m) + " section " +
                           std::to_string(section);
    const std::vector<int> tiles = tile_prefix(q_lens, block_m, num_m);
    const WsVarlenOrder order{tiles.data(), batch, heads, section};
    const int items = tiles[batch] * heads, g_sec = std::min(section, heads);
    std::set<std::tuple<int, int, int>> seen;
    for (int z = 0; z < items; z += 2) {
      int ma = -1, pa = -1, mb = -1, pb = -1;
      order.item(z, ma, pa, true);
      const int b = pa / heads, m_b = tiles[b + 1] - tiles[b];
      ASSERT_TRUE(b >= 0 && b < batch && ma >= 0 && ma < m_b) << at << " z " << z;
      EXPECT_TRUE(seen.insert({b, pa % heads, ma}).second) << at << " z " << z;
      if (z + 1 == items) break;
      order.item(z + 1, mb, pb, true);
      const int b2 = pb / heads;
      ASSERT_TRUE(b2 >= 0 && b2 < batch && mb >= 0 && mb < tiles[b2 + 1] - tiles[b2]) << at << " z " << z + 1;
      EXPECT_TRUE(seen.insert({b2, pb % heads, mb}).second) << at << " z " << z + 1;
      const int sec = (pa % heads) / g_sec;
      if (b2 != b || (pb % heads) / g_sec != sec) continue;  // a unit over two sections
      const int start = tiles[b] * heads + sec * g_sec * m_b;  // the section's first position
      if (start % 2 == 0) {
        if (ma == mb) {  // two middle tiles (m_b odd) of two heads
          EXPECT_EQ(m_b % 2, 1) << at << " z " << z;
          EXPECT_EQ(ma, m_b / 2) << at << " z " << z;
          EXPECT_NE(pa, pb) << at << " z " << z;
        } else {  // one head's i-th longest and i-th shortest
          EXPECT_EQ(pa, pb) << at << " z " << z;
          EXPECT_EQ(ma + mb, m_b - 1) << at << " z " << z;
          EXPECT_GT(ma, mb) << at << " z " << z;
        }
      } else {
        EXPECT_TRUE(ma + mb == m_b - 1 || ma + mb == m_b - 2) << at << " z " << z << " m_b " << m_b;
      }
    }
    EXPECT_EQ(static_cast<int>(seen.size()), items) << at;
    for (int g : {1, 7, 132}) {
      std::set<std::tuple<int, int, int>> walked;
      int taken = 0;
      for (int c = 0; c < g; ++c) {
        varlen_walk(true, c, g, items, [&](int z) {
          int m = -1, pair = -1;
          order.item(z, m, pair, true);
          walked.insert({pair / heads, pair % heads, m});
          ++taken;
        });
      }
      EXPECT_EQ(taken, items) << at << " g " << g;
      EXPECT_EQ(walked, seen) << at << " g " << g;
    }
    if (HasFailure()) return;
  }
}

// The static walk's balance over a skewed causal batch (one 8k prompt among 63 of 64-511 tokens,
// q = k, 16 heads, 128-row q tiles of m + 1 key tiles of 128 and an item's fixed cost of about one
// tile, 132 CTAs), in sections of 16 heads (packed: 8 MB of K/V over the mean sequence's keys)
// and of 2 (paged: over the block table's reach, the 8k prompt's keys; ws_section): the round
// robin over WsVarlenOrder gives the busiest CTA 1.109 and 1.667 of the mean (the SMs busy 0.91
// and 0.63 of the span on the trace, session 56 call 3), the zigzag 1.047 in both (0.95 and 0.94).
TEST(PrefillWorkOrder, VarlenZigzagBalancesASkewedCausalBatch) {
  std::mt19937 rng(4);
  std::vector<int> q_lens = {8192};
  for (int i = 0; i < 63; ++i) q_lens.push_back(64 + static_cast<int>(rng() % 448));
  const int heads = 16, block_m = 128, g = 132, num_m = 8192 / block_m;
  const std::vector<int> tiles = tile_prefix(q_lens, block_m, num_m);
  const int items = tiles.back() * heads;
  for (const int section : {16, 2}) {
    const WsVarlenOrder order{tiles.data(), static_cast<int>(q_lens.size()), heads, section};
    auto busiest = [&](bool zig) {
      std::vector<int64_t> load(g, 0);
      for (int c = 0; c < g; ++c) {
        varlen_walk(zig, c, g, items, [&](int z) {
          int m = -1, pair = -1;
          order.item(z, m, pair, zig);
          load[c] += (m + 1) + 1;  // key tiles and the item's fixed cost
        });
      }
      const double mean = static_cast<double>(std::accumulate(load.begin(), load.end(), int64_t{0})) / g;
      return static_cast<double>(*std::max_element(load.begin(), load.end())) / mean;
    };
    const double rr = busiest(false), zig = busiest(true);
    const std::string at = "section " + std::to_string(section);
    RecordProperty("round_robin_" + std::to_string(section), std::to_string(rr));
    RecordProperty("zigzag_" + std::to_string(section), std::to_string(zig));
    std::printf("skewed batch, %s, the busiest CTA over the mean: round robin %.3f, zigzag %.3f\n", at.c_str(), rr, zig);
    EXPECT_LT(zig, 1.05) << at;
    EXPECT_GT(rr, zig + (section == 2 ? 0.5 : 0.04)) << at;
  }
}

// The comment's example: one 8k prompt among 63 of 256 tokens, 32 heads, 128-row q tiles.
TEST(PrefillWorkOrder, SkewedBatchHasFewItemsOfTheGridOrders) {
  std::vector<int> q_lens = {8192};
  q_lens.resize(64, 256);
  const int num_m = 8192 / 128, heads = 32;
  EXPECT_EQ(check_varlen(q_lens, heads, 128, num_m, 32, "skew"), 6080);
  EXPECT_EQ(num_m * heads * static_cast<int>(q_lens.size()), 131072);
  // Uniform lengths: the same items as the grid order, and with one section of all heads a
  // single sequence's order is the grid order itself.
  const std::vector<int> one = {1000};
  const std::vector<int> tiles = tile_prefix(one, 128, 8);
  const WsVarlenOrder v{tiles.data(), 1, 16, 16};
  const WsWorkOrder g{8, 16, 16};
  for (int w = 0; w < 8 * 16; ++w) {
    int vm, vp, gm, gp;
    v.item(w, vm, vp);
    g.item(w, gm, gp);
    EXPECT_EQ(vm, gm);
    EXPECT_EQ(vp, gp);
  }
}

TEST(PrefillWorkOrder, QTilesOfASequence) {
  EXPECT_EQ(ws_q_tiles(0, 128, 10), 0);
  EXPECT_EQ(ws_q_tiles(-3, 128, 10), 0);
  EXPECT_EQ(ws_q_tiles(1, 128, 10), 1);
  EXPECT_EQ(ws_q_tiles(128, 128, 10), 1);
  EXPECT_EQ(ws_q_tiles(129, 128, 10), 2);
  EXPECT_EQ(ws_q_tiles(193, 192, 10), 2);
  EXPECT_EQ(ws_q_tiles(5000, 128, 10), 10);  // capped at the grid's num_m
}

// The section's pairs (prefill v4.36's 8 MB of K and V): one pair without a causal mask; causal,
// the pairs whose K and V fit the budget, at least one and at most all of them, a kv head's K/V
// shared by its query heads.
TEST(PrefillWorkOrder, SectionsHoldThePairsWhoseKVFitTheBudget) {
  const int64_t mb = int64_t{1} << 20;
  EXPECT_EQ(kWsSectionBytes, 8 * mb);
  // Non-causal (and no budget asked for): one pair, whatever the K/V.
  EXPECT_EQ(ws_section_pairs(512, 1024, 64, 1, false, kWsSectionBytes), 1);
  EXPECT_EQ(ws_section_pairs(512, 16, 64, 1, false, 32 * mb), 1);
  // d 64 16x1k causal (32 heads, 512 pairs): 1024 keys x 64 x 2 x 2 bytes = 256 KB a pair.
  EXPECT_EQ(ws_section_pairs(512, 1024, 64, 1, true, kWsSectionBytes), 32);
  EXPECT_EQ(ws_section_pairs(512, 1024, 64, 1, true, 32 * mb), 128);  // v4.35's budget
  // d 128 1x16k causal: 8 MB a pair, one pair; d 256: 16 MB, still one (at least one).
  EXPECT_EQ(ws_section_pairs(16, 16384, 128, 1, true, kWsSectionBytes), 1);
  EXPECT_EQ(ws_section_pairs(8, 16384, 256, 1, true, kWsSectionBytes), 1);
  // d 128 4x4k causal: 2 MB a pair, four pairs of the 64.
  EXPECT_EQ(ws_section_pairs(64, 4096, 128, 1, true, kWsSectionBytes), 4);
  // GQA 32/8: four query heads share a kv head's K/V, so a pair counts a quarter of it.
  EXPECT_EQ(ws_section_pairs(64, 4096, 128, 4, true, kWsSectionBytes), 16);
  // Capped at the pairs there are; tiny K/V never divides by zero.
  EXPECT_EQ(ws_section_pairs(3, 16, 64, 1, true, kWsSectionBytes), 3);
  EXPECT_EQ(ws_section_pairs(7, 0, 64, 1, true, kWsSectionBytes), 7);
  EXPECT_EQ(ws_section_pairs(7, 1, 64, 8, true, kWsSectionBytes), 7);
  EXPECT_EQ(ws_section_pairs(7, 1024, 64, 0, true, kWsSectionBytes), 7);  // a group of 0 reads as 1
}

}  // namespace
}  // namespace flashserve::cuda
