#include "server/text/bpe.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <mutex>

namespace flashserve::text {
namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// (left id, right id) -> (rank, merged id), open addressing with linear probing.
class MergeTable {
 public:
  struct Entry {
    uint64_t key = kEmpty;
    int32_t rank = 0, merged = 0;
  };
  static constexpr uint64_t kEmpty = ~0ull;

  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Entry{});
    mask_ = cap - 1;
  }
  // Keeps the first (lowest-ranked) merge of a pair, as HF does for duplicate merges.
  void insert(int32_t left, int32_t right, int32_t rank, int32_t merged) {
    const uint64_t key = pack(left, right);
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return;
      if (slots_[i].key == kEmpty) {
        slots_[i] = Entry{key, rank, merged};
        return;
      }
    }
  }
  const Entry* find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
    }
  }

 private:
  static uint64_t pack(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  static uint64_t mix(uint64_t x) {  // splitmix64's finalizer
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  std::vector<Entry> slots_;
  size_t mask_ = 0;
};

// A sharded cache of piece -> ids for pieces up to kMaxCachedBytes, so that concurrent encodes
// rarely wait on one another's lock. A full shard is cleared (a cache, not a dictionary).
constexpr size_t kMaxCachedBytes = 64;
constexpr size_t kShards = 16;
constexpr size_t kShardCapacity = 8192;

struct CacheShard {
  std::mutex mu;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
};

// Pieces up to this many symbols merge with a rank-min scan over a small array (cheaper than
// a heap for words); longer ones (a run of a thousand spaces) use the heap.
constexpr size_t kScanMaxSymbols = 48;

}  // namespace

struct BpeModel::Impl {
  Options options;
  int32_t byte_id[256];
  MergeTable merges;
  StringMap vocab;  // raw bytes -> id
  mutable CacheShard cache[kShards];

  void initial_symbols(std::string_view piece, std::vector<int32_t>* sym) const {
    sym->clear();
    bool last_unk = false;
    for (char c : piece) {
      const int32_t id = byte_id[static_cast<uint8_t>(c)];
      if (id >= 0) {
        sym->push_back(id);
        last_unk = false;
      } else if (options.unk_id >= 0) {
        if (!(options.fuse_unk && last_unk)) sym->push_back(options.unk_id);
        last_unk = true;
      }  // else: HF drops a character it has no symbol for when there is no unk token
    }
  }

  void merge_scan(std::vector<int32_t>* sym) const {
    std::vector<int32_t>& s = *sym;
    size_t n = s.size();
    if (n < 2) return;
    int32_t rank[kScanMaxSymbols];
    int32_t merged[kScanMaxSymbols];
    for (size_t i = 0; i + 1 < n; ++i) {
      const MergeTable::Entry* e = merges.find(s[i], s[i + 1]);
      rank[i] = e ? e->rank : INT_MAX;
      merged[i] = e ? e->merged : -1;
    }
    while (n > 1) {
      size_t best = 0;
      for (size_t i = 1; i + 1 < n; ++i) {
        if (rank[i] < rank[best]) best = i;
      }
      if (rank[best] == INT_MAX) break;
      s[best] = merged[best];
      // Remove symbol best+1 and pair best+1.
      for (size_t i = best + 1; i + 1 < n; ++i) s[i] = s[i + 1];
      for (size_t i = best + 1; i + 2 < n; ++i) {
        rank[i] = rank[i + 1];
        merged[i] = merged[i + 1];
      }
      --n;
      auto refresh = [&](size_t i) {
        const MergeTable::Entry* e = merges.find(s[i], s[i + 1]);
        rank[i] = e ? e->rank : INT_MAX;
        merged[i] = e ? e->merged : -1;
      };
      if (best > 0) refresh(best - 1);
      if (best + 1 < n) refresh(best);
    }
    s.resize(n);
  }

  void merge_heap(std::vector<int32_t>* sym) const {
    std::vector<int32_t>& s = *sym;
    const int32_t n = static_cast<int32_t>(s.size());
    struct Candidate {
      int32_t rank, pos, merged;
    };
    // Min-heap on (rank, pos): the lowest rank first, the leftmost among equals.
    auto later = [](const Candidate& a, const Candidate& b) {
      return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
    };
    std::vector<int32_t> prev(n), next(n);
    std::vector<char> alive(n, 1);
    std::vector<Candidate> heap;
    for (int32_t i = 0; i < n; ++i) {
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
      if (i + 1 < n) {
        if (const MergeTable::Entry* e = merges.find(s[i], s[i + 1])) heap.push_back({e->rank, i, e->merged});
      }
    }
    std::make_heap(heap.begin(), heap.end(), later);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), later);
      const Candidate top = heap.back();
      heap.pop_back();
      if (!alive[top.pos] || next[top.pos] < 0) continue;
      const int32_t right = next[top.pos];
      const MergeTable::Entry* e = merges.find(s[top.pos], s[right]);
      if (e == nullptr || e->merged != top.merged) continue;  // a stale candidate
      s[top.pos] = top.merged;
      alive[right] = 0;
      next[top.pos] = next[right];
      if (next[right] >= 0) prev[next[right]] = top.pos;
      if (prev[top.pos] >= 0) {
        if (const MergeTable::Entry* pe = merges.find(s[prev[top.pos]], s[top.pos])) {
          heap.push_back({pe->rank, prev[top.pos], pe->merged});
          std::push_heap(heap.begin(), heap.end(), later);
        }
      }
      if (next[top.pos] >= 0) {
        if (const MergeTable::Entry* ne = merges.find(s[top.pos], s[next[top.pos]])) {
          heap.push_back({ne->rank, top.pos, ne->merged});
          std::push_heap(heap.begin(), heap.end(), later);
        }
      }
    }
    size_t out = 0;
    for (int32_t i = 0; i < n; ++i) {
      if (alive[i]) s[out++] = s[i];
    }
    s.resize(out);
  }

  void encode_uncached(std::string_view piece, std::vector<int32_t>* ids) const {
    if (options.ignore_merges) {
      const auto it = vocab.find(piece);
      if (it != vocab.end()) {
        ids->push_back(it->second);
        return;
      }
    }
    thread_local std::vector<int32_t> sym;
    initial_symbols(piece, &sym);
    if (sym.size() <= kScanMaxSymbols) merge_scan(&sym);
    else merge_heap(&sym);
    ids->insert(ids->end(), sym.begin(), sym.end());
  }
};

BpeModel::BpeModel() : impl_(std::make_unique<Impl>()) {}
BpeModel::~BpeModel() = default;
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;

Status BpeModel::init(const std::vector<std::pair<bool, std::string>>& tokens,
                      const std::vector<std::pair<int32_t, int32_t>>& merges, const Options& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  const int32_t vocab_size = static_cast<int32_t>(tokens.size());
  if (options.unk_id >= vocab_size) {
    return out_of_range("BPE: unk id " + std::to_string(options.unk_id) + " outside the vocabulary");
  }
  impl->vocab.reserve(tokens.size());
  for (int32_t id = 0; id < vocab_size; ++id) {
    if (!tokens[id].first) continue;
    impl->vocab.emplace(tokens[id].second, id);  // a duplicate keeps its first id
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const auto it = impl->vocab.find(std::string_view(&c, 1));
    impl->byte_id[b] = it == impl->vocab.end() ? -1 : it->second;
  }
  impl->merges.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [left, right] = merges[rank];
    if (left < 0 || left >= vocab_size || right < 0 || right >= vocab_size || !tokens[left].first ||
        !tokens[right].first) {
      return invalid_argument("BPE: merge " + std::to_string(rank) + " names a token outside the vocabulary");
    }
    joined = tokens[left].second + tokens[right].second;
    const auto it = impl->vocab.find(joined);
    if (it == impl->vocab.end()) {
      return invalid_argument("BPE: merge " + std::to_string(rank) + " makes a token that is not in the vocabulary");
    }
    impl->merges.insert(left, right, static_cast<int32_t>(rank), it->second);
  }
  impl_ = std::move(impl);
  return Status::Ok();
}

int32_t BpeModel::find(std::string_view bytes) const {
  const auto it = impl_->vocab.find(bytes);
  return it == impl_->vocab.end() ? -1 : it->second;
}

void BpeModel::encode_piece_uncached(std::string_view piece, std::vector<int32_t>* ids) const {
  impl_->encode_uncached(piece, ids);
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.size() == 1) {  // a single byte: its symbol, no merge to look for
    const int32_t id = impl_->byte_id[static_cast<uint8_t>(piece[0])];
    if (id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  if (piece.size() > kMaxCachedBytes) {
    impl_->encode_uncached(piece, ids);
    return;
  }
  const size_t h = StringHash{}(piece);
  CacheShard& shard = impl_->cache[(h >> 7) % kShards];
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    const auto it = shard.map.find(piece);
    if (it != shard.map.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = ids->size();
  impl_->encode_uncached(piece, ids);
  std::vector<int32_t> value(ids->begin() + static_cast<std::ptrdiff_t>(first), ids->end());
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.map.size() >= kShardCapacity) shard.map.clear();
  shard.map.emplace(std::string(piece), std::move(value));
}

}  // namespace flashserve::text
