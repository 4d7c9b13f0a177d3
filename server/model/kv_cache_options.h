// The KV cache's element type and, for FP8, where its scales come from (issue 25): the server's
// --kv-cache-dtype and --kv-cache-scale, parsed here so that the server, the tools and the tests
// read them alike.
//
// Scales (FP8 only; element = scale·fp8(code), one scale per (layer, kv head) for K and for V),
// first that applies:
//   1. --kv-cache-scale K[,V]: every layer and kv head (V = K when one value is given);
//   2. the checkpoint's per-layer scales (`model.layers.N.self_attn.k_scale` / `v_scale`, or one
//      `kv_scale` for both, as FP8 checkpoints carry them: a scalar for every kv head of the layer,
//      or one a kv head);
//   3. calibrated: the first forward step that writes a layer (its first prefill: nothing can be
//      decoded before a prompt is written) sets, per kv head, scale = amax(|x|) · headroom /
//      fp8_max over that step's new K (V) of the head, NaN and inf ignored (a head with no finite
//      non-zero value keeps 1.0). headroom = kDefaultCalibrationHeadroom: values up to twice the
//      calibration prompt's largest still fit, larger ones saturate to ±max (append's
//      convention). vLLM's calculate_kv_scales does the same with amax / 200 for K and
//      amax / 100 for V on e4m3 (headroom 2.24 and 4.48); FP8's relative precision is the same
//      over its normal range, so the headroom costs only the smallest values.
// The fixed point: once a layer's scales are set (by 1, 2, or its first prefill), they never
// change; every later token of every sequence is quantized with them (bench/NOTES.md "FP8 KV
// cache (issue 25), CPU": what the choice costs in perplexity).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "kvcache/kv_storage.h"
#include "server/model/weights.h"

namespace flashserve::model {

inline constexpr float kDefaultCalibrationHeadroom = 2.f;

struct KvCacheOptions {
  DType dtype = DType::kFloat32;  // the pool's element type (the CPU model: fp32, bf16, fp16, fp8_*)
  // FP8: fixed scales for every layer and kv head (--kv-cache-scale); 0: none given.
  float k_scale = 0.f, v_scale = 0.f;
  float calibration_headroom = kDefaultCalibrationHeadroom;  // > 0 and finite
  bool has_fixed_scales() const { return k_scale > 0.f; }
  Status validate() const;
};

// The policy above over a model's FP8 pool, layer by layer: the CPU model (llama.cc) and the CUDA
// model (cuda/llama_cuda.cc) both keep one, so that they fix their scales alike. Nothing to do
// for a pool that is not FP8.
class KvScales {
 public:
  // Policies 1 and 2 for every layer of `storage` (weights: the checkpoint's per-layer scales;
  // null for weights made on the device, which carry none); the other layers wait for calibrate.
  Status init(const KvCacheOptions& kv, const LlamaWeights* weights, KVStorage* storage);
  // Whether layer `layer`'s first write must calibrate it first (FP8, not yet fixed).
  bool needs_calibration(int32_t layer) const {
    return layer >= 0 && layer < static_cast<int32_t>(source_.size()) && source_[layer].empty();
  }
  // Policy 3: from the largest finite |K| and |V| of each kv head over the layer's first
  // written step (amax_k, amax_v: [num_kv_heads]), scale = amax · headroom / fp8_max; a head
  // whose amax gives no finite scale > 0 (all zeros) keeps 1.0. Then fixed.
  Status calibrate(int32_t layer, const float* amax_k, const float* amax_v, KVStorage* storage);
  // Whether the layer's scales are fixed, and by what ("--kv-cache-scale", "checkpoint",
  // "calibrated"; "" while not fixed, or for a pool that is not FP8).
  bool fixed(int32_t layer) const {
    return layer >= 0 && layer < static_cast<int32_t>(source_.size()) && !source_[layer].empty();
  }
  const std::string& source(int32_t layer) const;
  // Whether some layer still waits for its calibration (its first write).
  bool pending() const;
  // For the start-up log: where layer 0's scales come from, or will.
  std::string describe() const;

 private:
  KvCacheOptions kv_;
  std::vector<std::string> source_;  // FP8: [num_layers]; empty for other pools
};

// --kv-cache-dtype: "auto" gives `activation` (the model's own type: fp32 on the CPU, bf16 on
// CUDA); "bf16", "fp16", "fp8_e4m3", "fp8_e5m2" name the type. INVALID_ARGUMENT naming the
// flag and the choices otherwise.
Status parse_kv_cache_dtype(const std::string& text, DType activation, DType* out);

// --kv-cache-scale "K" or "K,V": decimal numbers, finite and > 0 (INVALID_ARGUMENT naming the
// flag and the bad part otherwise: empty, not a number, NaN, inf, <= 0, more than two values).
Status parse_kv_cache_scale(const std::string& text, float* k_scale, float* v_scale);

}  // namespace flashserve::model
