// A Llama-family model's configuration, as Hugging Face's LlamaConfig (config.json) defines it,
// and the synthetic presets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace flashserve::model {

// Rotary scaling as transformers' rope_type: "default" (none), "llama3" (Llama 3.1's per-band
// blend) and "linear" (positions divided by factor, i.e. every frequency divided by it).
// "dynamic", "yarn", "longrope" and others are refused at load (UNSUPPORTED, named).
struct RopeScaling {
  bool llama3 = false;  // rope_type == "llama3"
  bool linear = false;  // rope_type == "linear"
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct LlamaConfig {
  int32_t vocab_size = 0;
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_hidden_layers = 0;
  int32_t num_attention_heads = 0;
  int32_t num_key_value_heads = 0;
  int32_t head_dim = 0;  // hidden_size / num_attention_heads unless given
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int32_t max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  std::vector<int32_t> eos_token_ids;

  Status validate() const;
  // The rotary inverse frequencies [head_dim / 2], llama3 scaling applied.
  std::vector<double> inv_freq() const;
};

// Parses a config.json's text, as transformers writes it: the rotary settings under
// rope_parameters ({rope_type, rope_theta, ...}; transformers >= 5) or as the older top-level
// rope_theta and rope_scaling. What this model does not compute is refused with a message
// naming the key, never silently computed another way: attention_bias or mlp_bias true, a
// hidden_act other than silu, an unsupported rope_type, a model_type that is not Llama-family.
Status parse_llama_config(const std::string& json_text, LlamaConfig* out);
// A generation_config.json's eos_token_id (an id or a list), which transformers' generate uses
// over config.json's: replaces out->eos_token_ids when present. A malformed file is an error.
Status apply_generation_config(const std::string& json_text, LlamaConfig* out);
// "tiny" (fast on 2 CPU cores) or "llama3-8b" (Llama-3-8B shapes).
Status synthetic_preset(const std::string& name, LlamaConfig* out);

}  // namespace flashserve::model
