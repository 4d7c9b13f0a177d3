// The scheduler's one view of the KV cache (vLLM's KVCacheManager / KVCacheBlocks): it asks
// "can these n new tokens of this sequence get slots?" and "give me their slot mapping", and
// never touches pool internals.
//
// A sequence holds the number of its tokens that have slots (K/V written or being written this
// step) and an append-only block table. Its token ids live in one place, the caller's (the
// engine's request: prompt, then every generated token; vLLM's request.all_token_ids): the
// manager keeps no copy and reads the caller's span when it needs them. Slots are
// block·block_size + offset. When a block fills up it is hashed (parent hash, its tokens,
// the sequence's extra key) into the prefix cache; a new sequence's prompt reuses the longest
// cached run of full blocks, always leaving at least one prompt token to compute (the model
// needs its logits). fork() shares every block; the first write into a shared, partly filled
// last block copies it first (copy-on-write): the copy is returned for the storage to apply
// before the step writes. Running out of blocks is an ordinary RESOURCE_EXHAUSTED that changes
// nothing (the scheduler preempts or waits).
//
// Not thread-safe: owned by the engine's scheduler thread.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "kvcache/block_copy.h"
#include "kvcache/block_pool.h"

namespace flashserve {

struct KVCacheConfig {
  int32_t num_blocks = 0;           // including the null block 0
  int32_t block_size = 16;          // any power of two 1..256
  bool enable_prefix_caching = true;
  int32_t max_blocks_per_seq = 0;   // 0: num_blocks - 1 (the block table's width)
  Status validate() const;
};

struct KVCacheStats {
  int64_t prefix_queries = 0;  // prompt tokens looked up
  int64_t prefix_hits = 0;     // of those, found in the cache
  int64_t evictions = 0;       // cached free blocks handed out for new contents
  int32_t num_free_blocks = 0;
  int32_t num_usable_blocks = 0;
  double usage() const {
    return num_usable_blocks ? 1.0 - static_cast<double>(num_free_blocks) / num_usable_blocks : 0.0;
  }
};

class KVCacheManager {
 public:
  // config must validate(); a bad one leaves a manager of one usable block.
  explicit KVCacheManager(const KVCacheConfig& config);

  const KVCacheConfig& config() const { return config_; }

  // Registers a sequence with its prompt (n >= 1 tokens, read here and not kept) and attaches the
  // longest cached prefix of full blocks; *num_cached_tokens (may be null) gets how many prompt
  // tokens already have K/V. INVALID_ARGUMENT for a known id or an empty prompt.
  Status add_sequence(int64_t seq_id, const int32_t* prompt, int32_t n, uint64_t extra_key,
                      int32_t* num_cached_tokens);

  // Blocks that allocate_slots(seq_id, n) would take from the pool now (new blocks, plus one
  // for a copy-on-write); -1 for an unknown sequence.
  int32_t blocks_needed(int64_t seq_id, int32_t n) const;
  bool can_allocate(int64_t seq_id, int32_t n) const;

  // Gives slots to the sequence's next n tokens, tokens[num_slotted_tokens(), + n). tokens: all of
  // the sequence's token ids so far (prompt, then generated; a sampled token that waits for its
  // slot included), whose first num_slotted_tokens() are the ones slotted before; blocks that fill
  // up are hashed from it. Appends the slots to *slot_mapping and copy-on-write work to *copies.
  // RESOURCE_EXHAUSTED leaves everything unchanged; OUT_OF_RANGE when the sequence would outgrow
  // max_blocks_per_seq; INVALID_ARGUMENT when tokens holds fewer than num_slotted_tokens() + n -
  // unknown. unknown: how many of the slotted tokens may be past tokens' end, their ids not known
  // yet (a token still being drawn on the device while the next step that decodes it is
  // prepared: the engine's overlapped steps). A block that fills up is hashed once all its ids
  // are known: at a later call whose tokens hold them.
  Status allocate_slots(int64_t seq_id, std::span<const int32_t> tokens, int32_t n,
                        std::vector<int64_t>* slot_mapping, std::vector<BlockCopy>* copies, int32_t unknown = 0);

  // A new sequence sharing all of parent's blocks (parallel sampling, beams); its tokens, the
  // caller's, begin as the parent's.
  Status fork(int64_t parent_id, int64_t child_id);
  // Returns every block (the tail first, so prefix blocks stay cached longest).
  Status free_sequence(int64_t seq_id);

  bool has_sequence(int64_t seq_id) const { return seqs_.count(seq_id) != 0; }
  const std::vector<int32_t>* block_table(int64_t seq_id) const;
  int32_t num_slotted_tokens(int64_t seq_id) const;  // tokens with slots (-1: unknown)
  int32_t num_sequences() const { return static_cast<int32_t>(seqs_.size()); }

  KVCacheStats stats() const;
  const BlockPool& pool() const { return pool_; }
  void reset_prefix_cache() { pool_.reset_prefix_cache(); }

 private:
  struct Sequence {
    int32_t num_slotted = 0;
    std::vector<int32_t> blocks;
    std::vector<uint64_t> block_hashes;  // of the full blocks, in order
    uint64_t extra_key = 0;
  };

  int32_t new_blocks_for(const Sequence& s, int32_t n, bool* cow) const;
  void cache_full_blocks(Sequence& s, std::span<const int32_t> tokens);  // the full blocks tokens covers

  KVCacheConfig config_;
  BlockPool pool_;
  std::unordered_map<int64_t, Sequence> seqs_;
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;
};

}  // namespace flashserve
