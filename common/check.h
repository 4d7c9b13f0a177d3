// Small argument checks shared by every entry point; each returns a status whose message
// names the call and the field.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace flashserve {

inline Status check_pointer(const char* where, const char* name, const void* p, int64_t align) {
  if (p == nullptr) return invalid_argument(std::string(where) + ": " + name + " is null");
  if (reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align) != 0)
    return invalid_argument(std::string(where) + ": " + name + " is not " + std::to_string(align) +
                            "-byte aligned");
  return Status::Ok();
}

inline Status check_positive(const char* where, const char* name, int64_t v) {
  if (v <= 0)
    return invalid_argument(std::string(where) + ": " + name + " = " + std::to_string(v) + " must be > 0");
  return Status::Ok();
}

inline Status check_finite(const char* where, const char* name, float v) {
  if (!std::isfinite(v))
    return invalid_argument(std::string(where) + ": " + name + " is not finite");
  return Status::Ok();
}

}  // namespace flashserve
