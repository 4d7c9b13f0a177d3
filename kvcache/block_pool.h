// The block pool: which physical KV blocks are in use, by how many owners, and which free
// blocks still hold reusable prefix contents (vLLM v1's block pool is the model).
//
// - Block 0 is the null block: never handed out, never freed (block tables may pad with it).
// - Reference counts: a block is owned by every sequence whose table holds it (fork shares).
// - Free list in eviction order: a block whose count drops to 0 goes to the tail (most recently
//   used); allocation takes from the head (least recently used). A free block that holds a
//   full, hashed block of tokens stays findable in the prefix cache until it is handed out
//   again ("evicted"), so a later prompt can take it back without recomputing it.
// - Prefix cache: full blocks are keyed by a hash of (parent block's hash, their token ids,
//   an extra key such as a model or adapter id); the key stores the tokens and parent hash
//   too, and a lookup compares them, so a hash collision can never return wrong contents.
//
// Not thread-safe: the engine's scheduler owns it (one thread).
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace flashserve {

// A full block's identity: parent hash, token ids, extra key, and their 64-bit hash.
struct BlockKey {
  uint64_t hash = 0;
  uint64_t parent_hash = 0;
  uint64_t extra_key = 0;
  std::vector<int32_t> tokens;
  bool operator==(const BlockKey& o) const {
    return hash == o.hash && parent_hash == o.parent_hash && extra_key == o.extra_key && tokens == o.tokens;
  }
};

// Hash of a full block's tokens chained to its parent's hash (0 for the first block).
uint64_t hash_block(uint64_t parent_hash, const int32_t* tokens, int32_t n, uint64_t extra_key);

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching);

  int32_t num_blocks() const { return static_cast<int32_t>(ref_.size()); }
  int32_t block_size() const { return block_size_; }
  // Blocks that allocate() can hand out now (free, cached or not); the null block excluded.
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t num_usable() const { return num_blocks() - 1; }
  int32_t ref_count(int32_t block) const { return ref_[block]; }
  bool prefix_caching() const { return prefix_caching_; }

  // n fresh blocks (count 1 each), evicting the least recently used free ones (their cache
  // entries dropped). RESOURCE_EXHAUSTED, with nothing taken, when fewer than n are free.
  Status allocate(int32_t n, std::vector<int32_t>* out);
  // One more owner of an in-use or cached-free block (a prefix hit, a fork).
  Status retain(int32_t block);
  // Drops one owner of each block, in order; a block reaching 0 joins the free list's tail.
  // OUT_OF_RANGE for a bad id, INVALID_ARGUMENT for a block with no owner (double free); the
  // ids before the bad one stay released.
  Status release(const int32_t* blocks, int32_t n);

  // The cached block holding exactly this key, if any (free or in use).
  std::optional<int32_t> lookup(const BlockKey& key) const;
  // Records that `block` (in use) now holds the full block `key`. A block already cached, or a
  // key already held by another block, is left as it is.
  void cache(int32_t block, BlockKey key);
  const BlockKey* key_of(int32_t block) const;

  // Evicts every free cached block's entry (e.g. new weights); in-use blocks keep theirs.
  void reset_prefix_cache();
  int64_t num_evictions() const { return evictions_; }

 private:
  Status check_id(const char* where, int32_t block) const;
  void uncache(int32_t block);

  int32_t block_size_;
  bool prefix_caching_;
  std::vector<int32_t> ref_;
  std::list<int32_t> free_list_;                        // head: evicted first
  std::vector<std::list<int32_t>::iterator> free_pos_;  // valid while ref_ == 0
  std::vector<std::optional<BlockKey>> key_;            // what a cached block holds
  std::unordered_map<uint64_t, std::vector<int32_t>> by_hash_;  // hash -> blocks (collisions)
  int64_t evictions_ = 0;
};

}  // namespace flashserve
