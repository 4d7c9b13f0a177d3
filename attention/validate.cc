// The checks that the prefill and decode entry points share (attention/validate.h).
#include "attention/validate.h"

#include <string>

#include "attention/prefill.h"
#include "common/check.h"

namespace flashserve {

Status validate_mask(const char* where, const MaskParams& m) {
  FS_RETURN_IF_ERROR(check_finite(where, "softmax_scale", m.softmax_scale));
  FS_RETURN_IF_ERROR(check_finite(where, "softcap", m.softcap));
  if (m.softcap < 0.f) return invalid_argument(std::string(where) + ": softcap must be >= 0 (0 = off)");
  if (m.window_left < -1 || m.window_right < -1)
    return invalid_argument(std::string(where) + ": window sizes must be >= 0, or -1 for unlimited");
  if (m.alibi_slopes != nullptr)
    FS_RETURN_IF_ERROR(check_pointer(where, "alibi_slopes", m.alibi_slopes, 4));
  return Status::Ok();
}

Status validate_heads(const char* where, int32_t num_heads, int32_t num_kv_heads, int32_t head_dim,
                      Device device) {
  FS_RETURN_IF_ERROR(check_positive(where, "num_heads", num_heads));
  FS_RETURN_IF_ERROR(check_positive(where, "num_kv_heads", num_kv_heads));
  if (num_heads % num_kv_heads != 0)
    return invalid_argument(std::string(where) + ": num_heads (" + std::to_string(num_heads) +
                            ") is not a multiple of num_kv_heads (" + std::to_string(num_kv_heads) + ")");
  if (head_dim <= 0)
    return invalid_argument(std::string(where) + ": head_dim = " + std::to_string(head_dim) + " must be > 0");
  if (device == Device::kCPU && head_dim > kMaxHeadDimCPU)
    return unsupported(std::string(where) + ": head_dim " + std::to_string(head_dim) +
                       " is not supported on the CPU (1.." + std::to_string(kMaxHeadDimCPU) + ")");
  return Status::Ok();
}

}  // namespace flashserve
