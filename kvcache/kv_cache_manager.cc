#include "kvcache/kv_cache_manager.h"

#include <algorithm>
#include <string>

namespace flashserve {

namespace {

int32_t ceil_div(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

std::string seq_name(int64_t id) { return "sequence " + std::to_string(id); }

}  // namespace

Status KVCacheConfig::validate() const {
  if (num_blocks < 2) return invalid_argument("KVCacheConfig: num_blocks must be >= 2 (block 0 is the null block)");
  if (block_size < 1 || block_size > 256 || (block_size & (block_size - 1)))
    return invalid_argument("KVCacheConfig: block_size " + std::to_string(block_size) +
                            " must be a power of two in 1..256");
  if (max_blocks_per_seq < 0) return invalid_argument("KVCacheConfig: max_blocks_per_seq < 0");
  return Status::Ok();
}

KVCacheManager::KVCacheManager(const KVCacheConfig& config)
    : config_(config),
      pool_(config.validate().ok() ? config.num_blocks : 2, config.validate().ok() ? config.block_size : 1,
            config.enable_prefix_caching) {
  if (!config.validate().ok()) {
    config_.num_blocks = 2;
    config_.block_size = 1;
  }
  if (config_.max_blocks_per_seq == 0) config_.max_blocks_per_seq = config_.num_blocks - 1;
}

Status KVCacheManager::add_sequence(int64_t seq_id, const int32_t* prompt, int32_t n, uint64_t extra_key,
                                    int32_t* num_cached_tokens) {
  if (seqs_.count(seq_id)) return invalid_argument("add_sequence: " + seq_name(seq_id) + " exists");
  if (n < 1 || prompt == nullptr) return invalid_argument("add_sequence: the prompt is empty");
  Sequence s;
  s.extra_key = extra_key;
  const int32_t bs = config_.block_size;
  // Full blocks that leave at least one token to compute, capped by the table's width.
  const int32_t matchable = std::min((n - 1) / bs, config_.max_blocks_per_seq);
  uint64_t parent = 0;
  for (int32_t i = 0; i < matchable && pool_.prefix_caching(); ++i) {
    BlockKey key;
    key.parent_hash = parent;
    key.extra_key = extra_key;
    key.tokens.assign(prompt + i * bs, prompt + (i + 1) * bs);
    key.hash = hash_block(parent, key.tokens.data(), bs, extra_key);
    const auto hit = pool_.lookup(key);
    if (!hit) break;
    const Status st = pool_.retain(*hit);
    if (!st.ok()) {  // cannot happen for a looked-up block; undo and report
      pool_.release(s.blocks.data(), static_cast<int32_t>(s.blocks.size())).ok();
      return internal_error("add_sequence: " + st.message());
    }
    s.blocks.push_back(*hit);
    s.block_hashes.push_back(key.hash);
    parent = key.hash;
  }
  s.num_slotted = static_cast<int32_t>(s.blocks.size()) * bs;
  prefix_queries_ += n;
  prefix_hits_ += s.num_slotted;
  if (num_cached_tokens) *num_cached_tokens = s.num_slotted;
  seqs_.emplace(seq_id, std::move(s));
  return Status::Ok();
}

int32_t KVCacheManager::new_blocks_for(const Sequence& s, int32_t n, bool* cow) const {
  const int32_t bs = config_.block_size;
  *cow = n > 0 && s.num_slotted % bs != 0 && pool_.ref_count(s.blocks.back()) > 1;
  const int32_t needed = ceil_div(static_cast<int64_t>(s.num_slotted) + n, bs);
  return std::max(0, needed - static_cast<int32_t>(s.blocks.size())) + (*cow ? 1 : 0);
}

int32_t KVCacheManager::blocks_needed(int64_t seq_id, int32_t n) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end() || n < 0) return -1;
  bool cow;
  return new_blocks_for(it->second, n, &cow);
}

bool KVCacheManager::can_allocate(int64_t seq_id, int32_t n) const {
  const int32_t need = blocks_needed(seq_id, n);
  return need >= 0 && need <= pool_.num_free();
}

void KVCacheManager::cache_full_blocks(Sequence& s, std::span<const int32_t> tokens) {
  const int32_t bs = config_.block_size;
  const int32_t full = static_cast<int32_t>(std::min<int64_t>(s.num_slotted, static_cast<int64_t>(tokens.size())) / bs);
  while (static_cast<int32_t>(s.block_hashes.size()) < full) {
    const int32_t i = static_cast<int32_t>(s.block_hashes.size());
    BlockKey key;
    key.parent_hash = i ? s.block_hashes[i - 1] : 0;
    key.extra_key = s.extra_key;
    key.tokens.assign(tokens.begin() + i * bs, tokens.begin() + (i + 1) * bs);
    key.hash = hash_block(key.parent_hash, key.tokens.data(), bs, s.extra_key);
    s.block_hashes.push_back(key.hash);
    pool_.cache(s.blocks[i], std::move(key));
  }
}

Status KVCacheManager::allocate_slots(int64_t seq_id, std::span<const int32_t> tokens, int32_t n,
                                      std::vector<int64_t>* slot_mapping, std::vector<BlockCopy>* copies,
                                      int32_t unknown) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return invalid_argument("allocate_slots: unknown " + seq_name(seq_id));
  if (n < 0 || unknown < 0) return invalid_argument("allocate_slots: n or unknown is negative");
  Sequence& s = it->second;
  const int64_t known = static_cast<int64_t>(tokens.size()) + unknown;
  if (s.num_slotted + static_cast<int64_t>(n) > known)
    return invalid_argument("allocate_slots: " + seq_name(seq_id) + " has " +
                            std::to_string(known - s.num_slotted) + " tokens without slots, " +
                            std::to_string(n) + " asked");
  const int32_t bs = config_.block_size;
  const int64_t needed_blocks = (static_cast<int64_t>(s.num_slotted) + n + bs - 1) / bs;
  if (needed_blocks > config_.max_blocks_per_seq)
    return out_of_range("allocate_slots: " + seq_name(seq_id) + " would need " + std::to_string(needed_blocks) +
                        " blocks, past its block table's end (" + std::to_string(config_.max_blocks_per_seq) + ")");
  bool cow;
  const int32_t fresh = new_blocks_for(s, n, &cow);
  std::vector<int32_t> got;
  FS_RETURN_IF_ERROR(pool_.allocate(fresh, &got));  // nothing changed on failure

  size_t next = 0;
  if (cow) {
    const int32_t old = s.blocks.back();
    const int32_t dst = got[next++];
    copies->push_back({old, dst});
    s.blocks.back() = dst;
    pool_.release(&old, 1).ok();  // shared: its count stays >= 1
  }
  while (next < got.size()) s.blocks.push_back(got[next++]);
  for (int32_t i = 0; i < n; ++i) {
    const int64_t pos = s.num_slotted + i;
    slot_mapping->push_back(static_cast<int64_t>(s.blocks[pos / bs]) * bs + pos % bs);
  }
  s.num_slotted += n;
  cache_full_blocks(s, tokens);
  return Status::Ok();
}

Status KVCacheManager::fork(int64_t parent_id, int64_t child_id) {
  auto it = seqs_.find(parent_id);
  if (it == seqs_.end()) return invalid_argument("fork: unknown " + seq_name(parent_id));
  if (seqs_.count(child_id)) return invalid_argument("fork: " + seq_name(child_id) + " exists");
  for (int32_t b : it->second.blocks) FS_RETURN_IF_ERROR(pool_.retain(b));
  Sequence child = it->second;
  seqs_.emplace(child_id, std::move(child));
  return Status::Ok();
}

Status KVCacheManager::free_sequence(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return invalid_argument("free_sequence: unknown " + seq_name(seq_id));
  std::vector<int32_t> reversed(it->second.blocks.rbegin(), it->second.blocks.rend());
  seqs_.erase(it);
  return pool_.release(reversed.data(), static_cast<int32_t>(reversed.size()));
}

const std::vector<int32_t>* KVCacheManager::block_table(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? nullptr : &it->second.blocks;
}

int32_t KVCacheManager::num_slotted_tokens(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? -1 : it->second.num_slotted;
}

KVCacheStats KVCacheManager::stats() const {
  KVCacheStats st;
  st.prefix_queries = prefix_queries_;
  st.prefix_hits = prefix_hits_;
  st.evictions = pool_.num_evictions();
  st.num_free_blocks = pool_.num_free();
  st.num_usable_blocks = pool_.num_usable();
  return st;
}

}  // namespace flashserve
