// The C ABI's paged KV cache: opaque handles over KVStorage (pages on a device, append,
// copy-blocks) and KVCacheManager (the block pool and the sequences' block tables).
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "capi/guard.h"
#include "flashserve_c.h"
#include "kvcache/kv_cache_manager.h"
#include "kvcache/kv_storage.h"

struct fs_kv_storage {
  flashserve::KVStorage storage;
};

struct fs_block_manager {
  explicit fs_block_manager(const flashserve::KVCacheConfig& c) : manager(c) {}
  flashserve::KVCacheManager manager;
  // Each sequence's token ids: the manager keeps none, and a C caller hands them over once (the
  // prompt at add_sequence, generated ones as new_tokens), so this handle is their one place.
  std::unordered_map<int64_t, std::vector<int32_t>> tokens;
  std::vector<int64_t> slots;  // scratch for allocate_slots
  std::vector<flashserve::BlockCopy> copies;
};

namespace {

using flashserve::capi::guarded;
using flashserve::invalid_argument;
using flashserve::Status;

}  // namespace

extern "C" {

int fs_kv_storage_create(int32_t device, const fs_kv_shape* shape, fs_kv_storage** out) {
  return guarded("fs_kv_storage_create", [&]() -> Status {
    if (shape == nullptr) return invalid_argument("fs_kv_storage_create: shape is null");
    if (out == nullptr) return invalid_argument("fs_kv_storage_create: out is null");
    *out = nullptr;
    if (device != FS_DEVICE_CPU && device != FS_DEVICE_CUDA)
      return invalid_argument("fs_kv_storage_create: unknown device " + std::to_string(device));
    if (shape->dtype < FS_FLOAT32 || shape->dtype > FS_FP8_E5M2)
      return invalid_argument("fs_kv_storage_create: unknown dtype " + std::to_string(shape->dtype));
    flashserve::KVStorageShape s;
    s.num_layers = shape->num_layers;
    s.num_blocks = shape->num_blocks;
    s.num_kv_heads = shape->num_kv_heads;
    s.block_size = shape->block_size;
    s.head_dim = shape->head_dim;
    s.dtype = static_cast<flashserve::DType>(shape->dtype);
    auto h = std::make_unique<fs_kv_storage>();
    if (Status st = flashserve::KVStorage::create(static_cast<flashserve::Device>(device), s, &h->storage); !st.ok())
      return st;
    *out = h.release();
    return Status();
  });
}

void fs_kv_storage_destroy(fs_kv_storage* s) { delete s; }

int fs_kv_storage_pages(const fs_kv_storage* s, int32_t layer, fs_pages* out) {
  return guarded("fs_kv_storage_pages", [&]() -> Status {
    if (s == nullptr) return invalid_argument("fs_kv_storage_pages: storage is null");
    if (out == nullptr) return invalid_argument("fs_kv_storage_pages: out is null");
    const auto& shape = s->storage.shape();
    if (layer < 0 || layer >= shape.num_layers)
      return flashserve::out_of_range("fs_kv_storage_pages: layer " + std::to_string(layer) + " not in [0, " +
                                      std::to_string(shape.num_layers) + ")");
    const flashserve::KVPageView v = s->storage.view(layer, nullptr, 0, nullptr);
    *out = fs_pages{};
    out->k_pages = v.k_pages;
    out->v_pages = v.v_pages;
    out->block_stride = v.block_stride;
    out->head_stride = v.head_stride;
    out->token_stride = v.token_stride;
    out->num_blocks = v.num_blocks;
    out->block_size = v.block_size;
    out->dtype = static_cast<int32_t>(v.dtype);
    out->k_scales = v.k_scales;  // FP8: where the pool lives (a CPU pool's host array, a CUDA pool's device copy)
    out->v_scales = v.v_scales;
    return Status();
  });
}

int fs_kv_append(fs_kv_storage* s, int32_t first_layer, int32_t num_layers, const void* k_new, const void* v_new,
                 const int64_t* slots, int64_t n, void* stream) {
  return guarded("fs_kv_append", [&]() -> Status {
    if (s == nullptr) return invalid_argument("fs_kv_append: storage is null");
    return s->storage.append(first_layer, num_layers, k_new, v_new, slots, n, stream);
  });
}

int fs_kv_append_from(fs_kv_storage* s, int32_t first_layer, int32_t num_layers, int32_t src_dtype,
                      const void* k_new, const void* v_new, const int64_t* slots, int64_t n, void* stream) {
  return guarded("fs_kv_append_from", [&]() -> Status {
    if (s == nullptr) return invalid_argument("fs_kv_append_from: storage is null");
    if (src_dtype < FS_FLOAT32 || src_dtype > FS_FP8_E5M2)
      return invalid_argument("fs_kv_append_from: unknown dtype " + std::to_string(src_dtype));
    return s->storage.append(first_layer, num_layers, static_cast<flashserve::DType>(src_dtype), k_new, v_new, slots,
                             n, stream);
  });
}

int fs_kv_set_scales(fs_kv_storage* s, int32_t layer, const float* k_scales, const float* v_scales) {
  return guarded("fs_kv_set_scales", [&]() -> Status {
    if (s == nullptr) return invalid_argument("fs_kv_set_scales: storage is null");
    return s->storage.set_scales(layer, k_scales, v_scales);
  });
}

int fs_kv_check_slots(const fs_kv_storage* s, const int64_t* slots_host, int64_t n) {
  return guarded("fs_kv_check_slots", [&]() -> Status {
    if (s == nullptr) return invalid_argument("fs_kv_check_slots: storage is null");
    if (n > 0 && slots_host == nullptr) return invalid_argument("fs_kv_check_slots: slots is null");
    return s->storage.check_slots(slots_host, n);
  });
}

int fs_kv_copy_blocks(fs_kv_storage* s, const int32_t* src_dst_host, int32_t n, void* stream) {
  return guarded("fs_kv_copy_blocks", [&]() -> Status {
    if (s == nullptr) return invalid_argument("fs_kv_copy_blocks: storage is null");
    if (n < 0) return invalid_argument("fs_kv_copy_blocks: n = " + std::to_string(n));
    if (n > 0 && src_dst_host == nullptr) return invalid_argument("fs_kv_copy_blocks: pairs is null");
    std::vector<flashserve::BlockCopy> pairs(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) pairs[i] = {src_dst_host[2 * i], src_dst_host[2 * i + 1]};
    return s->storage.copy_blocks(pairs.data(), n, stream);
  });
}

int fs_block_manager_create(const fs_block_manager_config* config, fs_block_manager** out) {
  return guarded("fs_block_manager_create", [&]() -> Status {
    if (config == nullptr) return invalid_argument("fs_block_manager_create: config is null");
    if (out == nullptr) return invalid_argument("fs_block_manager_create: out is null");
    *out = nullptr;
    flashserve::KVCacheConfig c;
    c.num_blocks = config->num_blocks;
    c.block_size = config->block_size;
    c.enable_prefix_caching = config->enable_prefix_caching != 0;
    c.max_blocks_per_seq = config->max_blocks_per_seq;
    if (Status st = c.validate(); !st.ok()) return st;
    *out = new fs_block_manager(c);
    return Status();
  });
}

void fs_block_manager_destroy(fs_block_manager* m) { delete m; }

int fs_block_manager_add_sequence(fs_block_manager* m, int64_t seq_id, const int32_t* prompt, int32_t n,
                                  uint64_t extra_key, int32_t* num_cached_tokens) {
  return guarded("fs_block_manager_add_sequence", [&]() -> Status {
    if (m == nullptr) return invalid_argument("fs_block_manager_add_sequence: manager is null");
    if (n > 0 && prompt == nullptr) return invalid_argument("fs_block_manager_add_sequence: prompt is null");
    int32_t cached = 0;
    Status st = m->manager.add_sequence(seq_id, prompt, n, extra_key, &cached);
    if (!st.ok()) return st;
    m->tokens[seq_id].assign(prompt, prompt + n);
    if (num_cached_tokens != nullptr) *num_cached_tokens = cached;
    return st;
  });
}

int32_t fs_block_manager_blocks_needed(const fs_block_manager* m, int64_t seq_id, int32_t n) {
  if (m == nullptr || n < 0) return -1;
  return m->manager.blocks_needed(seq_id, n);
}

int fs_block_manager_allocate_slots(fs_block_manager* m, int64_t seq_id, int32_t n, const int32_t* new_tokens,
                                    int64_t* slots_out, int32_t* copies_out, int32_t copies_cap,
                                    int32_t* num_copies) {
  return guarded("fs_block_manager_allocate_slots", [&]() -> Status {
    if (m == nullptr) return invalid_argument("fs_block_manager_allocate_slots: manager is null");
    if (n > 0 && slots_out == nullptr) return invalid_argument("fs_block_manager_allocate_slots: slots_out is null");
    if (num_copies == nullptr) return invalid_argument("fs_block_manager_allocate_slots: num_copies is null");
    if (copies_cap < 1 || copies_out == nullptr)
      return invalid_argument("fs_block_manager_allocate_slots: copies_out needs room for at least one pair");
    m->slots.clear();
    m->copies.clear();
    auto it = m->tokens.find(seq_id);
    if (it == m->tokens.end())  // the manager's error for an unknown sequence
      return m->manager.allocate_slots(seq_id, {}, n, &m->slots, &m->copies);
    std::vector<int32_t>& toks = it->second;
    const size_t known = toks.size();
    if (new_tokens != nullptr && n > 0) toks.insert(toks.end(), new_tokens, new_tokens + n);
    if (Status st = m->manager.allocate_slots(seq_id, toks, n, &m->slots, &m->copies); !st.ok()) {
      toks.resize(known);  // a failed call changes nothing
      return st;
    }
    if (static_cast<int32_t>(m->copies.size()) > copies_cap)  // cannot happen: one copy per call at most
      return flashserve::internal_error("fs_block_manager_allocate_slots: more copies than copies_cap");
    for (size_t i = 0; i < m->slots.size(); ++i) slots_out[i] = m->slots[i];
    for (size_t i = 0; i < m->copies.size(); ++i) {
      copies_out[2 * i] = m->copies[i].src;
      copies_out[2 * i + 1] = m->copies[i].dst;
    }
    *num_copies = static_cast<int32_t>(m->copies.size());
    return Status();
  });
}

int fs_block_manager_fork(fs_block_manager* m, int64_t parent_id, int64_t child_id) {
  return guarded("fs_block_manager_fork", [&]() -> Status {
    if (m == nullptr) return invalid_argument("fs_block_manager_fork: manager is null");
    FS_RETURN_IF_ERROR(m->manager.fork(parent_id, child_id));
    m->tokens[child_id] = m->tokens[parent_id];
    return Status();
  });
}

int fs_block_manager_free_sequence(fs_block_manager* m, int64_t seq_id) {
  return guarded("fs_block_manager_free_sequence", [&]() -> Status {
    if (m == nullptr) return invalid_argument("fs_block_manager_free_sequence: manager is null");
    FS_RETURN_IF_ERROR(m->manager.free_sequence(seq_id));
    m->tokens.erase(seq_id);
    return Status();
  });
}

int fs_block_manager_block_table(const fs_block_manager* m, int64_t seq_id, int32_t* out, int32_t cap,
                                 int32_t* len) {
  return guarded("fs_block_manager_block_table", [&]() -> Status {
    if (m == nullptr) return invalid_argument("fs_block_manager_block_table: manager is null");
    if (len == nullptr) return invalid_argument("fs_block_manager_block_table: len is null");
    const std::vector<int32_t>* table = m->manager.block_table(seq_id);
    if (table == nullptr)
      return invalid_argument("fs_block_manager_block_table: unknown sequence " + std::to_string(seq_id));
    *len = static_cast<int32_t>(table->size());
    if (*len > cap || (*len > 0 && out == nullptr))
      return flashserve::out_of_range("fs_block_manager_block_table: " + std::to_string(*len) +
                                      " blocks, room for " + std::to_string(cap));
    for (int32_t i = 0; i < *len; ++i) out[i] = (*table)[i];
    return Status();
  });
}

int fs_block_manager_stats_get(const fs_block_manager* m, fs_block_manager_stats* out) {
  return guarded("fs_block_manager_stats_get", [&]() -> Status {
    if (m == nullptr) return invalid_argument("fs_block_manager_stats_get: manager is null");
    if (out == nullptr) return invalid_argument("fs_block_manager_stats_get: out is null");
    const flashserve::KVCacheStats s = m->manager.stats();
    *out = fs_block_manager_stats{s.prefix_queries, s.prefix_hits, s.evictions, s.num_free_blocks,
                                  s.num_usable_blocks, m->manager.num_sequences()};
    return Status();
  });
}

}  // extern "C"
