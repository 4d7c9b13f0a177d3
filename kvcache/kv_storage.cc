#include "kvcache/kv_storage.h"

#include <cmath>
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
    scales_ = std::move(o.scales_);
    o.scales_.clear();
    device_scales_ = std::exchange(o.device_scales_, nullptr);
    device_pairs_ = std::exchange(o.device_pairs_, nullptr);
    device_pairs_cap_ = std::exchange(o.device_pairs_cap_, 0);
    device_pairs_read_ = std::exchange(o.device_pairs_read_, nullptr);
  }
  return *this;
}

void KVStorage::release() {
  if (device_ == Device::kCUDA) {
#if FLASHSERVE_WITH_CUDA
    cuda::free_device(data_);
    cuda::free_device(device_pairs_);
    cuda::free_device(device_scales_);
    cuda::destroy_event(device_pairs_read_);
#endif
  } else {
    std::free(data_);
  }
  data_ = nullptr;
  device_scales_ = nullptr;
  scales_.clear();
  device_pairs_ = nullptr;
  device_pairs_cap_ = 0;
  device_pairs_read_ = nullptr;
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
  if (is_fp8(shape.dtype)) {
    s.scales_.assign(static_cast<size_t>(2) * shape.num_layers * shape.num_kv_heads, 1.f);
#if FLASHSERVE_WITH_CUDA
    if (device == Device::kCUDA) {
      const int64_t bytes = static_cast<int64_t>(s.scales_.size() * sizeof(float));
      void* p = nullptr;
      FS_RETURN_IF_ERROR(cuda::alloc_zeroed(bytes, &p));
      s.device_scales_ = static_cast<float*>(p);
      FS_RETURN_IF_ERROR(cuda::copy_to_device(s.device_scales_, s.scales_.data(), bytes));
    }
#endif
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
  KVPageView v = make_page_view(k_pages(layer), shape_.dtype, shape_.num_blocks, shape_.num_kv_heads,
                                shape_.block_size, shape_.head_dim, block_table, block_table_stride, seq_lens);
  v.k_scales = k_scales(layer);
  v.v_scales = v_scales(layer);
  if (device_scales_ != nullptr && v.k_scales != nullptr) {  // a CUDA pool: its kernels read the device copy
    v.k_scales = device_scales_ + (v.k_scales - scales_.data());
    v.v_scales = device_scales_ + (v.v_scales - scales_.data());
  }
  return v;
}

const float* KVStorage::k_scales(int32_t layer) const {
  if (scales_.empty() || layer < 0 || layer >= shape_.num_layers) return nullptr;
  return scales_.data() + static_cast<size_t>(2 * layer) * shape_.num_kv_heads;
}

const float* KVStorage::v_scales(int32_t layer) const {
  const float* k = k_scales(layer);
  return k ? k + shape_.num_kv_heads : nullptr;
}

Status KVStorage::set_scales(int32_t layer, const float* k_scales, const float* v_scales) {
  constexpr const char* where = "KVStorage::set_scales";
  if (data_ == nullptr) return invalid_argument("KVStorage::set_scales: storage not created");
  if (!is_fp8(shape_.dtype))
    return invalid_argument(std::string("KVStorage::set_scales: scales are for FP8 pools; this pool holds ") +
                            dtype_name(shape_.dtype));
  if (layer < 0 || layer >= shape_.num_layers)
    return out_of_range("KVStorage::set_scales: layer " + std::to_string(layer) + " outside [0, " +
                        std::to_string(shape_.num_layers) + ")");
  FS_RETURN_IF_ERROR(check_pointer(where, "k_scales", k_scales, 4));
  FS_RETURN_IF_ERROR(check_pointer(where, "v_scales", v_scales, 4));
  for (const auto& [name, src] : {std::pair{"k_scales", k_scales}, std::pair{"v_scales", v_scales}}) {
    for (int32_t h = 0; h < shape_.num_kv_heads; ++h) {
      if (!(src[h] > 0.f) || !std::isfinite(src[h]))
        return invalid_argument(std::string("KVStorage::set_scales: ") + name + "[" + std::to_string(h) +
                                "] = " + std::to_string(src[h]) + " must be finite and > 0");
    }
  }
  float* dst = scales_.data() + static_cast<size_t>(2 * layer) * shape_.num_kv_heads;
#if FLASHSERVE_WITH_CUDA
  if (device_scales_ != nullptr) {  // the device copy first: on failure nothing has changed
    std::vector<float> both(k_scales, k_scales + shape_.num_kv_heads);
    both.insert(both.end(), v_scales, v_scales + shape_.num_kv_heads);
    FS_RETURN_IF_ERROR(cuda::copy_to_device(device_scales_ + (dst - scales_.data()), both.data(),
                                            static_cast<int64_t>(both.size() * sizeof(float))));
  }
#endif
  std::memcpy(dst, k_scales, sizeof(float) * shape_.num_kv_heads);
  std::memcpy(dst + shape_.num_kv_heads, v_scales, sizeof(float) * shape_.num_kv_heads);
  return Status::Ok();
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
  return append(first_layer, num_layers, shape_.dtype, k_new, v_new, slots, n, stream);
}

Status KVStorage::append(int32_t first_layer, int32_t num_layers, DType src_dtype, const void* k_new,
                         const void* v_new, const int64_t* slots, int64_t n, void* stream) {
  constexpr const char* where = "KVStorage::append";
  if (data_ == nullptr) return invalid_argument("KVStorage::append: storage not created");
  if (n < 0) return invalid_argument("KVStorage::append: n is negative");
  if (first_layer < 0 || num_layers < 1 || first_layer + num_layers > shape_.num_layers)
    return out_of_range("KVStorage::append: layers [" + std::to_string(first_layer) + ", " +
                        std::to_string(first_layer + num_layers) + ") outside [0, " +
                        std::to_string(shape_.num_layers) + ")");
  if (!is_valid(src_dtype)) return invalid_argument("KVStorage::append: invalid source dtype");
  const bool quantize = is_fp8(shape_.dtype) && is_activation_dtype(src_dtype);
  // fp32 into a 16-bit pool (the CPU model's --kv-cache-dtype bf16/fp16): rounded to nearest even.
  const bool narrow = src_dtype == DType::kFloat32 &&
                      (shape_.dtype == DType::kBFloat16 || shape_.dtype == DType::kFloat16);
  if (src_dtype != shape_.dtype && !quantize && !narrow)
    return invalid_argument(std::string("KVStorage::append: K/V of ") + dtype_name(src_dtype) + " into a " +
                            dtype_name(shape_.dtype) +
                            " pool (the pool's own type, fp32/fp16/bf16 into an FP8 pool, or fp32 into a 16-bit "
                            "pool on the CPU)");
  if (src_dtype != shape_.dtype && !quantize && device_ == Device::kCUDA)
    return invalid_argument(std::string("KVStorage::append: on CUDA K/V come in the pool's type (") +
                            dtype_name(shape_.dtype) + ", or fp32/fp16/bf16 into an FP8 pool), got " +
                            dtype_name(src_dtype));
  if (n == 0) return Status::Ok();
  const int64_t elem = dtype_size(shape_.dtype), src_elem = dtype_size(src_dtype);
  FS_RETURN_IF_ERROR(check_pointer(where, "k_new", k_new, src_elem));
  FS_RETURN_IF_ERROR(check_pointer(where, "v_new", v_new, src_elem));
  FS_RETURN_IF_ERROR(check_pointer(where, "slots", slots, 8));
  if (device_ == Device::kCUDA) {
#if FLASHSERVE_WITH_CUDA
    return cuda::append_kv(*this, first_layer, num_layers, src_dtype, k_new, v_new, slots, n, device_scales_, stream);
#else
    return unsupported("KVStorage: built without CUDA");
#endif
  }
  if (stream != nullptr) return invalid_argument("KVStorage::append: a CPU call takes no stream");
  FS_RETURN_IF_ERROR(check_slots(slots, n));
  const int64_t row = static_cast<int64_t>(shape_.num_kv_heads) * shape_.head_dim;  // elements per token
  const int64_t head_bytes = shape_.head_dim * elem;
  const KVPageView pv = view(0, nullptr, 0, nullptr);  // every layer's strides
  const int32_t D = shape_.head_dim;
  // One head's D values of src_dtype -> codes: x / scale in fp32, then round to nearest even
  // with saturation (dtype.h).
  auto quantize_head = [&](const char* src, float scale, uint8_t* dst) {
    for (int32_t d = 0; d < D; ++d) {
      const float x = load_as_float(src, src_dtype, d) / scale;
      dst[d] = shape_.dtype == DType::kFp8E4M3 ? float_to_fp8_e4m3(x) : float_to_fp8_e5m2(x);
    }
  };
  ThreadPool::global().parallel_for(n, [&](int64_t i) {
    if (slots[i] < 0) return;
    for (int32_t l = 0; l < num_layers; ++l) {
      const char* ks = static_cast<const char*>(k_new) + ((l * n + i) * row) * src_elem;
      const char* vs = static_cast<const char*>(v_new) + ((l * n + i) * row) * src_elem;
      char* kd = static_cast<char*>(k_pages(first_layer + l));
      char* vd = static_cast<char*>(v_pages(first_layer + l));
      const float* k_scale = k_scales(first_layer + l);
      const float* v_scale = v_scales(first_layer + l);
      for (int32_t h = 0; h < shape_.num_kv_heads; ++h) {
        const int64_t dst = pv.offset_of_slot(slots[i], h) * elem;
        if (quantize) {
          quantize_head(ks + h * D * src_elem, k_scale[h], reinterpret_cast<uint8_t*>(kd + dst));
          quantize_head(vs + h * D * src_elem, v_scale[h], reinterpret_cast<uint8_t*>(vd + dst));
        } else if (narrow) {
          convert_from_float(reinterpret_cast<const float*>(ks) + h * D, shape_.dtype, D, kd + dst);
          convert_from_float(reinterpret_cast<const float*>(vs) + h * D, shape_.dtype, D, vd + dst);
        } else {
          std::memcpy(kd + dst, ks + h * head_bytes, head_bytes);
          std::memcpy(vd + dst, vs + h * head_bytes, head_bytes);
        }
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
    return cuda::copy_blocks(*this, pairs, n, device_pairs_, &device_pairs_read_, stream);
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
