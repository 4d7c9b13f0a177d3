#include "server/model/kv_cache_options.h"

#include <charconv>
#include <cmath>

namespace flashserve::model {

namespace {

bool finite_positive(float v) { return v > 0.f && std::isfinite(v); }

// One value of --kv-cache-scale: the whole text a decimal number, finite and > 0.
Status parse_scale(const std::string& part, const char* which, float* out) {
  float v = 0.f;
  const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
  if (part.empty() || ec != std::errc() || end != part.data() + part.size() || !finite_positive(v))
    return invalid_argument(std::string("--kv-cache-scale: the ") + which + " scale '" + part +
                            "' is not a finite number > 0 (K or K,V, e.g. 0.05 or 0.05,0.02)");
  *out = v;
  return Status::Ok();
}

}  // namespace

Status KvCacheOptions::validate() const {
  if (!is_valid(dtype)) return invalid_argument("KV cache: invalid dtype");
  if (k_scale != 0.f || v_scale != 0.f) {
    if (!is_fp8(dtype))
      return invalid_argument(std::string("--kv-cache-scale is for an FP8 cache (fp8_e4m3, fp8_e5m2); this one is ") +
                              dtype_name(dtype));
    if (!finite_positive(k_scale) || !finite_positive(v_scale))
      return invalid_argument("--kv-cache-scale: K and V scales must be finite and > 0");
  }
  if (!finite_positive(calibration_headroom))
    return invalid_argument("KV cache: the calibration headroom must be finite and > 0");
  return Status::Ok();
}

Status parse_kv_cache_dtype(const std::string& text, DType activation, DType* out) {
  if (text == "auto") {
    *out = activation;
    return Status::Ok();
  }
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFp8E4M3, DType::kFp8E5M2}) {
    if (text == dtype_name(t)) {
      *out = t;
      return Status::Ok();
    }
  }
  return invalid_argument("--kv-cache-dtype: '" + text + "' is not one of auto, bf16, fp16, fp8_e4m3, fp8_e5m2");
}

Status parse_kv_cache_scale(const std::string& text, float* k_scale, float* v_scale) {
  const size_t comma = text.find(',');
  float k = 0.f, v = 0.f;
  FS_RETURN_IF_ERROR(parse_scale(text.substr(0, comma), "K", &k));
  if (comma == std::string::npos) {
    v = k;
  } else {
    const std::string rest = text.substr(comma + 1);
    if (rest.find(',') != std::string::npos)
      return invalid_argument("--kv-cache-scale: '" + text + "' has more than two values (K or K,V)");
    FS_RETURN_IF_ERROR(parse_scale(rest, "V", &v));
  }
  *k_scale = k;
  *v_scale = v;
  return Status::Ok();
}

}  // namespace flashserve::model
