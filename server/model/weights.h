// A Llama model's weights in fp32 on the host (the CPU path computes in fp32), from a Hugging
// Face model folder (config.json + *.safetensors, fp32/fp16/bf16) or synthetic from a seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/model/config.h"
#include "server/model/safetensors.h"

namespace flashserve::model {

struct LayerWeights {
  std::vector<float> input_norm;  // [hidden]
  std::vector<float> wq;          // [heads·head_dim, hidden]
  std::vector<float> wk, wv;      // [kv_heads·head_dim, hidden]
  std::vector<float> wo;          // [hidden, heads·head_dim]
  std::vector<float> post_norm;   // [hidden]
  std::vector<float> w_gate, w_up;  // [intermediate, hidden]
  std::vector<float> w_down;      // [hidden, intermediate]
  // FP8 checkpoints' KV cache scales (self_attn.k_scale / v_scale, or kv_scale for both): [1] for
  // every kv head or [kv_heads]; empty where the checkpoint has none (server/model/kv_cache_options.h).
  std::vector<float> k_scale, v_scale;
};

struct LlamaWeights {
  std::vector<float> embed;       // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab, hidden]; empty when tied to embed
  const std::vector<float>& output() const { return lm_head.empty() ? embed : lm_head; }
};

// Random weights (fixed seed): norms near 1, projections N(0, 1/fan_in).
Status synthetic_weights(const LlamaConfig& c, uint64_t seed, LlamaWeights* out);
// Reads every tensor by its Hugging Face name from the files (any split across files), and the
// optional per-layer KV cache scales (a scale that is not finite and > 0, or of another shape
// than [], [1] or [kv_heads], is INVALID_ARGUMENT naming the tensor).
Status load_weights(const LlamaConfig& c, const std::vector<SafetensorsFile>& files, LlamaWeights* out);
// A model folder: config.json and every *.safetensors in it.
Status load_model_folder(const std::string& dir, LlamaConfig* config, LlamaWeights* weights);
// The weights as named tensors (for writing a model folder), stored as `dtype`.
std::vector<TensorToWrite> weights_as_tensors(const LlamaConfig& c, const LlamaWeights& w, DType dtype);

}  // namespace flashserve::model
