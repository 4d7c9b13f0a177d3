#include "kvcache/kv_storage.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "common/check.h"
#include "common/thread_pool.h"
#if FLASHSERVE_WITH_CUDA
#include "kvcache/cuda/kv_kernels.h"
#endif

namespace flashserve {

Status KVStorageShape::validate() const {
  constexpr const char* where = "KVStorage";
  FS_RETURN_IF_ERROR(check_positive(where, "num_layers", num_layers));
  FS_RETURN_IF_ERROR(check_positive(where, "num_blocks", num_blocks));
  FS_RETURN_IF_ERROR(check_positive(where, "num_kv_heads", num_kv_heads));
  FS_RETURN_IF_ERROR(check_positive(where, "block_size", block_size));
  FS_RETURN_IF_ERROR(check_positive(where, "head_dim", head_dim));
  if (!is_valid(dtype)) return invalid_argument("KVStorage: invalid dtype");
  return Status::Ok();
}

KVStorage::~KVStorage() { release(); }

KVStorage::KVStorage(KVStorage&& o) noexcept { *this = std::move(o); }

KVStorage& KVStorage::operator=(KVStorage&& o) noexcept {
  if (this != &o) {
    release();
    device_ = o.device_;
    shape_ = o.shape_;
    data_ = std::exchange(o.data_, nullptr);
    device_pairs_ = std::exchange(o.device_pairs_, nullptr);
    device_pairs_cap_ = std::exchange(o.device_pairs_cap_, 0);
  }
  return *this;
}

void KVStorage::release() {
  if (device_ == Device::kCUDA) {
#if FLASHSERVE_WITH_CUDA
    cuda::free_device(data_);
    cuda::free_device(device_pairs_);
#endif
  } else {
    std::free(data_);
  }
  data_ = nullptr;
  device_pairs_ = nullptr;
  device_pairs_cap_ = 0;
}

Status KVStorage::create(Device device, const KVStorageShape& shape, KVStorage* out) {
  FS_RETURN_IF_ERROR(shape.validate());
  if (!is_valid(device)) return invalid_argument("KVStorage: invalid device");
  KVStorage s;
  s.device_ = device;
  s.shape_ = shape;
  const int64_t bytes = shape.bytes();
  if (device == Device::kCUDA) {
#if FLASHSERVE_WITH_CUDA
    void* p = nullptr;
    FS_RETURN_IF_ERROR(cuda::alloc_zeroed(bytes, &p));
    s.data_ = static_cast<char*>(p);
#else
    return unsupported("KVStorage: flashserve was built without CUDA");
#endif
  } else {
    const size_t rounded = static_cast<size_t>((bytes + 63) / 64 * 64);
    s.data_ = static_cast<char*>(std::aligned_alloc(64, rounded));
    if (s.data_ == nullptr)
      return resource_exhausted("KVStorage: cannot allocate " + std::to_string(bytes) + " bytes");
    std::memset(s.data_, 0, rounded);
  }
  *out = std::move(s);
  return Status::Ok();
}

void* KVStorage::k_pages(int32_t layer) const {
  return data_ + static_cast<int64_t>(layer) * shape_.pool_elems() * dtype_size(shape_.dtype);
}

void* KVStorage::v_pages(int32_t layer) const {
  return static_cast<char*>(k_pages(layer)) + shape_.block_elems() * dtype_size(shape_.dtype);
}

KVPageView KVStorage::view(int32_t layer, const int32_t* block_table, int64_t block_table_stride,
                           const int32_t* seq_lens) const {
  return make_page_view(k_pages(layer), dtype_size(shape_.dtype), shape_.num_blocks, shape_.num_kv_heads,
                        shape_.block_size, shape_.head_dim, block_table, block_table_stride, seq_lens);
}

Status KVStorage::check_slots(const int64_t* slots, int64_t n) const {
  const int64_t capacity = static_cast<int64_t>(shape_.num_blocks) * shape_.block_size;
  for (int64_t i = 0; i < n; ++i) {
    if (slots[i] < -1 || slots[i] >= capacity)
      return out_of_range("KVStorage::append: slots[" + std::to_string(i) + "] = " + std::to_string(slots[i]) +
                          " is out of range [0, " + std::to_string(capacity) + ")");
  }
  return Status::Ok();
}

Status KVStorage::append(int32_t first_layer, int32_t num_layers, const void* k_new, const void* v_new,
                         const int64_t* slots, int64_t n, void* stream) {
  constexpr const char* where = "KVStorage::append";
  if (data_ == nullptr) return invalid_argument("KVStorage::append: storage not created");
  if (n < 0) return invalid_argument("KVStorage::append: n is negative");
  if (first_layer < 0 || num_layers < 1 || first_layer + num_layers > shape_.num_layers)
    return out_of_range("KVStorage::append: layers [" + std::to_string(first_layer) + ", " +
                        std::to_string(first_layer + num_layers) + ") outside [0, " +
                        std::to_string(shape_.num_layers) + ")");
  if (n == 0) return Status::Ok();
  const int64_t elem = dtype_size(shape_.dtype);
  FS_RETURN_IF_ERROR(check_pointer(where, "k_new", k_new, elem));
  FS_RETURN_IF_ERROR(check_pointer(where, "v_new", v_new, elem));
  FS_RETURN_IF_ERROR(check_pointer(where, "slots", slots, 8));
  if (device_ == Device::kCUDA) {
#if FLASHSERVE_WITH_CUDA
    return cuda::append_kv(*this, first_layer, num_layers, k_new, v_new, slots, n, stream);
#else
    return unsupported("KVStorage: built without CUDA");
#endif
  }
  if (stream != nullptr) return invalid_argument("KVStorage::append: a CPU call takes no stream");
  FS_RETURN_IF_ERROR(check_slots(slots, n));
  const int64_t row = static_cast<int64_t>(shape_.num_kv_heads) * shape_.head_dim;  // elements per token
  const int64_t head_bytes = shape_.head_dim * elem;
  const KVPageView pv = view(0, nullptr, 0, nullptr);  // every layer's strides
  ThreadPool::global().parallel_for(n, [&](int64_t i) {
    if (slots[i] < 0) return;
    for (int32_t l = 0; l < num_layers; ++l) {
      const char* ks = static_cast<const char*>(k_new) + ((l * n + i) * row) * elem;
      const char* vs = static_cast<const char*>(v_new) + ((l * n + i) * row) * elem;
      char* kd = static_cast<char*>(k_pages(first_layer + l));
      char* vd = static_cast<char*>(v_pages(first_layer + l));
      for (int32_t h = 0; h < shape_.num_kv_heads; ++h) {
        const int64_t dst = pv.offset_of_slot(slots[i], h) * elem;
        std::memcpy(kd + dst, ks + h * head_bytes, head_bytes);
        std::memcpy(vd + dst, vs + h * head_bytes, head_bytes);
      }
    }
  });
  return Status::Ok();
}

Status KVStorage::copy_blocks(const BlockCopy* pairs, int32_t n, void* stream) {
  if (data_ == nullptr) return invalid_argument("KVStorage::copy_blocks: storage not created");
  if (n < 0) return invalid_argument("KVStorage::copy_blocks: n is negative");
  if (n == 0) return Status::Ok();
  FS_RETURN_IF_ERROR(check_pointer("KVStorage::copy_blocks", "pairs", pairs, 4));
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t b : {pairs[i].src, pairs[i].dst}) {
      if (b < 0 || b >= shape_.num_blocks)
        return out_of_range("KVStorage::copy_blocks: pairs[" + std::to_string(i) + "] names block " +
                            std::to_string(b) + ", out of range [0, " + std::to_string(shape_.num_blocks) + ")");
    }
  }
  if (device_ == Device::kCUDA) {
#if FLASHSERVE_WITH_CUDA
    if (n > device_pairs_cap_) {
      cuda::free_device(device_pairs_);
      device_pairs_ = nullptr;
      device_pairs_cap_ = 0;
      void* p = nullptr;
      FS_RETURN_IF_ERROR(cuda::alloc_zeroed(static_cast<int64_t>(n) * 8, &p));
      device_pairs_ = static_cast<int64_t*>(p);
      device_pairs_cap_ = n;
    }
    return cuda::copy_blocks(*this, pairs, n, device_pairs_, stream);
#else
    return unsupported("KVStorage: built without CUDA");
#endif
  }
  if (stream != nullptr) return invalid_argument("KVStorage::copy_blocks: a CPU call takes no stream");
  // A block's K and V (every head) are one run of block_stride elements from its first key.
  const KVPageView pv = view(0, nullptr, 0, nullptr);
  const int64_t elem = dtype_size(shape_.dtype), block_bytes = pv.block_stride * elem;
  for (int32_t l = 0; l < shape_.num_layers; ++l) {
    char* pool = static_cast<char*>(k_pages(l));
    for (int32_t i = 0; i < n; ++i)
      std::memmove(pool + pv.offset(pairs[i].dst, 0, 0) * elem, pool + pv.offset(pairs[i].src, 0, 0) * elem,
                   block_bytes);
  }
  return Status::Ok();
}

}  // namespace flashserve
