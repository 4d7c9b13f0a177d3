// Writes a small Llama model folder (config.json with llama3 rope scaling + fp32 safetensors)
// and our CPU model's logits for a fixed token sequence, for tools/hf_crosscheck.py to compare
// with Hugging Face's LlamaForCausalLM on the same folder.
// Usage: hf_dump DIR
#include <cstdio>
#include <fstream>
#include <vector>

#include "server/model/llama.h"

using namespace flashserve;
using namespace flashserve::model;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: hf_dump DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  LlamaConfig c;
  if (!synthetic_preset("tiny", &c).ok()) return 1;
  c.rope_theta = 500000.0;
  c.rope_scaling.llama3 = true;
  c.rope_scaling.factor = 8.0;
  c.rope_scaling.original_max_position_embeddings = 64;  // small, so every rope branch is used
  c.rms_norm_eps = 1e-5;
  LlamaWeights w;
  if (!synthetic_weights(c, 99, &w).ok()) return 1;
  const Status ws = write_safetensors(dir + "/model.safetensors", weights_as_tensors(c, w, DType::kFloat32));
  if (!ws.ok()) {
    std::fprintf(stderr, "%s\n", ws.to_string().c_str());
    return 1;
  }
  std::ofstream(dir + "/config.json") << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 512, "hidden_size": 128, "intermediate_size": 344, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0, "max_position_embeddings": 4096, "tie_word_embeddings": false,
    "hidden_act": "silu", "attention_bias": false, "mlp_bias": false, "torch_dtype": "float32",
    "bos_token_id": 1, "eos_token_id": 2,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 64}})";
  // Load the folder back the way the server does, and run the no-cache forward.
  LlamaConfig lc;
  LlamaWeights lw;
  const Status ls = load_model_folder(dir, &lc, &lw);
  if (!ls.ok()) {
    std::fprintf(stderr, "%s\n", ls.to_string().c_str());
    return 1;
  }
  LlamaModel m;
  if (!LlamaModel::create(lc, std::move(lw), 4, 16, &m).ok()) return 1;
  std::vector<int32_t> tokens;
  for (int i = 0; i < 300; ++i) tokens.push_back((i * 37 + 11) % 512);  // positions past 64: scaled rope
  std::vector<float> logits;
  if (!m.reference_forward(tokens, &logits).ok()) return 1;
  std::ofstream(dir + "/tokens.txt") << [&] {
    std::string s;
    for (int32_t t : tokens) s += std::to_string(t) + " ";
    return s;
  }();
  std::ofstream out(dir + "/logits_ours.f32", std::ios::binary);
  out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * 4));
  std::printf("wrote %s: %zu tokens, logits [%zu]\n", dir.c_str(), tokens.size(), logits.size());
  return 0;
}
