#include "server/model/kv_cache_options.h"

#include <algorithm>
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

Status KvScales::init(const KvCacheOptions& kv, const LlamaWeights* weights, KVStorage* storage) {
  FS_RETURN_IF_ERROR(kv.validate());
  kv_ = kv;
  source_.clear();
  const KVStorageShape& sh = storage->shape();
  if (!is_fp8(sh.dtype)) return Status::Ok();
  const int32_t L = sh.num_layers, Hkv = sh.num_kv_heads;
  if (weights != nullptr && static_cast<int32_t>(weights->layers.size()) != L)
    return invalid_argument("KV cache scales: the weights have " + std::to_string(weights->layers.size()) +
                            " layers, the cache " + std::to_string(L));
  source_.assign(static_cast<size_t>(L), "");
  for (int32_t l = 0; l < L; ++l) {
    std::vector<float> ks(static_cast<size_t>(Hkv)), vs(ks.size());
    if (kv.has_fixed_scales()) {
      std::fill(ks.begin(), ks.end(), kv.k_scale);
      std::fill(vs.begin(), vs.end(), kv.v_scale);
      source_[l] = "--kv-cache-scale";
    } else if (weights != nullptr && !weights->layers[l].k_scale.empty()) {
      const LayerWeights& lw = weights->layers[l];  // [1]: every head; [kv_heads]: one a head (weights.h)
      for (int32_t h = 0; h < Hkv; ++h) {
        ks[h] = lw.k_scale[lw.k_scale.size() == 1 ? 0 : h];
        vs[h] = lw.v_scale[lw.v_scale.size() == 1 ? 0 : h];
      }
      source_[l] = "checkpoint";
    } else {
      continue;  // calibrated on the layer's first prefill
    }
    FS_RETURN_IF_ERROR(storage->set_scales(l, ks.data(), vs.data()));
  }
  return Status::Ok();
}

Status KvScales::calibrate(int32_t layer, const float* amax_k, const float* amax_v, KVStorage* storage) {
  if (!needs_calibration(layer)) return internal_error("KV cache scales: layer " + std::to_string(layer) + " is fixed");
  const int32_t Hkv = storage->shape().num_kv_heads;
  const float fmax = fp8_max(storage->shape().dtype);
  std::vector<float> ks(static_cast<size_t>(Hkv), 1.f), vs(ks.size(), 1.f);
  for (int32_t h = 0; h < Hkv; ++h) {
    const float kscale = amax_k[h] * kv_.calibration_headroom / fmax;
    const float vscale = amax_v[h] * kv_.calibration_headroom / fmax;
    if (finite_positive(kscale)) ks[h] = kscale;  // an all-zero head keeps 1.0
    if (finite_positive(vscale)) vs[h] = vscale;
  }
  FS_RETURN_IF_ERROR(storage->set_scales(layer, ks.data(), vs.data()));
  source_[layer] = "calibrated";
  return Status::Ok();
}

const std::string& KvScales::source(int32_t layer) const {
  static const std::string none;
  return layer >= 0 && layer < static_cast<int32_t>(source_.size()) ? source_[layer] : none;
}

bool KvScales::pending() const {
  return std::any_of(source_.begin(), source_.end(), [](const std::string& s) { return s.empty(); });
}

namespace {
// The shortest text that reads back as v (locale-free).
std::string shortest(float v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}
}  // namespace

std::string KvScales::describe() const {
  if (source_.empty()) return "none (not an FP8 cache)";
  if (kv_.has_fixed_scales())
    return "--kv-cache-scale K " + shortest(kv_.k_scale) + " V " + shortest(kv_.v_scale) + ", every layer and kv head";
  if (source_[0] == "checkpoint") return "the checkpoint's k_scale/v_scale";
  return "calibrated on each layer's first prefill, then fixed";
}

}  // namespace flashserve::model
