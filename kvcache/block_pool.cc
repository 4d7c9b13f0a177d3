#include "kvcache/block_pool.h"

#include <algorithm>
#include <string>

namespace flashserve {

namespace {

// splitmix64's finaliser: a fast, well-mixed 64-bit step.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t hash_block(uint64_t parent_hash, const int32_t* tokens, int32_t n, uint64_t extra_key) {
  uint64_t h = mix(parent_hash ^ 0x5bd1e9955bd1e995ull);
  h = mix(h ^ extra_key);
  for (int32_t i = 0; i < n; ++i) h = mix(h ^ static_cast<uint32_t>(tokens[i]));
  return h == 0 ? 1 : h;  // 0 is "no parent"
}

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching)
    : block_size_(block_size), prefix_caching_(enable_prefix_caching) {
  num_blocks = std::max(num_blocks, 1);
  ref_.assign(static_cast<size_t>(num_blocks), 0);
  free_pos_.resize(static_cast<size_t>(num_blocks));
  key_.resize(static_cast<size_t>(num_blocks));
  ref_[0] = 1;  // the null block: owned forever
  for (int32_t b = 1; b < num_blocks; ++b) free_pos_[b] = free_list_.insert(free_list_.end(), b);
}

Status BlockPool::check_id(const char* where, int32_t block) const {
  if (block <= 0 || block >= num_blocks())
    return out_of_range(std::string(where) + ": block " + std::to_string(block) + " is out of range [1, " +
                        std::to_string(num_blocks()) + ")");
  return Status::Ok();
}

void BlockPool::uncache(int32_t block) {
  if (!key_[block]) return;
  auto it = by_hash_.find(key_[block]->hash);
  if (it != by_hash_.end()) {
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), block), v.end());
    if (v.empty()) by_hash_.erase(it);
  }
  key_[block].reset();
}

Status BlockPool::allocate(int32_t n, std::vector<int32_t>* out) {
  if (n < 0) return invalid_argument("BlockPool::allocate: n is negative");
  if (n > num_free())
    return resource_exhausted("BlockPool::allocate: " + std::to_string(n) + " blocks asked, " +
                              std::to_string(num_free()) + " free");
  for (int32_t i = 0; i < n; ++i) {
    const int32_t b = free_list_.front();
    free_list_.pop_front();
    if (key_[b]) {
      uncache(b);
      ++evictions_;
    }
    ref_[b] = 1;
    out->push_back(b);
  }
  return Status::Ok();
}

Status BlockPool::retain(int32_t block) {
  FS_RETURN_IF_ERROR(check_id("BlockPool::retain", block));
  if (ref_[block] == 0) {
    if (!key_[block])
      return invalid_argument("BlockPool::retain: block " + std::to_string(block) + " is free and holds nothing");
    free_list_.erase(free_pos_[block]);  // a cache hit on a free block takes it back
  }
  ++ref_[block];
  return Status::Ok();
}

Status BlockPool::release(const int32_t* blocks, int32_t n) {
  for (int32_t i = 0; i < n; ++i) {
    const int32_t b = blocks[i];
    FS_RETURN_IF_ERROR(check_id("BlockPool::release", b));
    if (ref_[b] == 0)
      return invalid_argument("BlockPool::release: block " + std::to_string(b) + " is already free (double free)");
    if (--ref_[b] == 0) free_pos_[b] = free_list_.insert(free_list_.end(), b);
  }
  return Status::Ok();
}

std::optional<int32_t> BlockPool::lookup(const BlockKey& key) const {
  if (!prefix_caching_) return std::nullopt;
  auto it = by_hash_.find(key.hash);
  if (it == by_hash_.end()) return std::nullopt;
  for (int32_t b : it->second)
    if (key_[b] && *key_[b] == key) return b;
  return std::nullopt;
}

void BlockPool::cache(int32_t block, BlockKey key) {
  if (!prefix_caching_ || block <= 0 || block >= num_blocks() || key_[block]) return;
  if (lookup(key)) return;  // another block holds these contents already
  by_hash_[key.hash].push_back(block);
  key_[block] = std::move(key);
}

const BlockKey* BlockPool::key_of(int32_t block) const {
  if (block <= 0 || block >= num_blocks() || !key_[block]) return nullptr;
  return &*key_[block];
}

void BlockPool::reset_prefix_cache() {
  for (int32_t b : free_list_) uncache(b);
}

}  // namespace flashserve
