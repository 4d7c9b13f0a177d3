#include "common/dtype.h"

namespace flashserve {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "fp32";
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
    case DType::kFp8E4M3: return "fp8_e4m3";
    case DType::kFp8E5M2: return "fp8_e5m2";
  }
  return "invalid-dtype";
}

const char* device_name(Device d) {
  switch (d) {
    case Device::kCPU: return "cpu";
    case Device::kCUDA: return "cuda";
  }
  return "invalid-device";
}

bool is_valid(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || is_fp8(t);
}
bool is_valid(Device d) { return d == Device::kCPU || d == Device::kCUDA; }

void convert_to_float(const void* src, DType t, int64_t n, float* dst) {
  switch (t) {
    case DType::kFloat32: {
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      break;
    }
    case DType::kFloat16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_float(s[i]);
      break;
    }
    case DType::kBFloat16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);  // vectorizes: a shift
      break;
    }
    case DType::kFp8E4M3:
    case DType::kFp8E5M2: {
      for (int64_t i = 0; i < n; ++i) dst[i] = load_as_float(src, t, i);
      break;
    }
  }
}

void convert_from_float(const float* src, DType t, int64_t n, void* dst) {
  for (int64_t i = 0; i < n; ++i) store_from_float(dst, t, i, src[i]);
}

}  // namespace flashserve
