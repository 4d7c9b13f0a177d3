#include "server/model/weights.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace flashserve::model {

namespace {

struct Named {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float>* data;
};

// Every tensor of the model with its Hugging Face name and shape.
std::vector<Named> tensor_list(const LlamaConfig& c, LlamaWeights& w) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t Q = int64_t{c.num_attention_heads} * c.head_dim, KV = int64_t{c.num_key_value_heads} * c.head_dim;
  std::vector<Named> t;
  w.layers.resize(static_cast<size_t>(c.num_hidden_layers));
  t.push_back({"model.embed_tokens.weight", {V, H}, &w.embed});
  for (int32_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    t.push_back({p + "input_layernorm.weight", {H}, &l.input_norm});
    t.push_back({p + "self_attn.q_proj.weight", {Q, H}, &l.wq});
    t.push_back({p + "self_attn.k_proj.weight", {KV, H}, &l.wk});
    t.push_back({p + "self_attn.v_proj.weight", {KV, H}, &l.wv});
    t.push_back({p + "self_attn.o_proj.weight", {H, Q}, &l.wo});
    t.push_back({p + "post_attention_layernorm.weight", {H}, &l.post_norm});
    t.push_back({p + "mlp.gate_proj.weight", {I, H}, &l.w_gate});
    t.push_back({p + "mlp.up_proj.weight", {I, H}, &l.w_up});
    t.push_back({p + "mlp.down_proj.weight", {H, I}, &l.w_down});
  }
  t.push_back({"model.norm.weight", {H}, &w.final_norm});
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {V, H}, &w.lm_head});
  return t;
}

// An optional KV cache scale tensor: absent leaves *out empty; [] or [1] is one scale for every
// kv head, [kv_heads] one a head; each finite and > 0.
Status read_kv_scale(const std::vector<SafetensorsFile>& files, const std::string& name, int32_t num_kv_heads,
                     std::vector<float>* out) {
  out->clear();
  for (const auto& file : files) {
    if (!file.has(name)) continue;
    const std::vector<int64_t> shape = file.tensors().at(name).shape;
    if (!(shape.empty() || shape == std::vector<int64_t>{1} || shape == std::vector<int64_t>{num_kv_heads}))
      return invalid_argument("model weights: " + name + " must have shape [], [1] or [" +
                              std::to_string(num_kv_heads) + "] (one scale a kv head)");
    FS_RETURN_IF_ERROR(file.read_f32(name, shape, out));
    for (size_t h = 0; h < out->size(); ++h) {
      if (!((*out)[h] > 0.f) || !std::isfinite((*out)[h]))
        return invalid_argument("model weights: " + name + "[" + std::to_string(h) + "] = " +
                                std::to_string((*out)[h]) + " must be finite and > 0");
    }
    return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace

Status synthetic_weights(const LlamaConfig& c, uint64_t seed, LlamaWeights* out) {
  FS_RETURN_IF_ERROR(c.validate());
  LlamaWeights w;
  std::mt19937_64 rng(seed);
  for (Named& t : tensor_list(c, w)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    t.data->resize(static_cast<size_t>(n));
    const bool norm = t.shape.size() == 1;
    const double stddev = norm ? 0.1 : (t.name == "model.embed_tokens.weight" ? 1.0 : 1.0 / std::sqrt(t.shape[1]));
    std::normal_distribution<float> dist(norm ? 1.f : 0.f, static_cast<float>(stddev));
    for (float& x : *t.data) x = dist(rng);
  }
  *out = std::move(w);
  return Status::Ok();
}

Status load_weights(const LlamaConfig& c, const std::vector<SafetensorsFile>& files, LlamaWeights* out) {
  FS_RETURN_IF_ERROR(c.validate());
  LlamaWeights w;
  for (Named& t : tensor_list(c, w)) {
    const SafetensorsFile* f = nullptr;
    for (const auto& file : files)
      if (file.has(t.name)) f = &file;
    if (f == nullptr) return invalid_argument("model weights: tensor " + t.name + " is in none of the files");
    FS_RETURN_IF_ERROR(f->read_f32(t.name, t.shape, t.data));
  }
  for (int32_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".self_attn.";
    LayerWeights& l = w.layers[i];
    FS_RETURN_IF_ERROR(read_kv_scale(files, p + "k_scale", c.num_key_value_heads, &l.k_scale));
    FS_RETURN_IF_ERROR(read_kv_scale(files, p + "v_scale", c.num_key_value_heads, &l.v_scale));
    std::vector<float> both;  // older FP8 checkpoints: one kv_scale for K and V
    FS_RETURN_IF_ERROR(read_kv_scale(files, p + "kv_scale", c.num_key_value_heads, &both));
    if (l.k_scale.empty()) l.k_scale = both;
    if (l.v_scale.empty()) l.v_scale = both;
    if (l.k_scale.empty() != l.v_scale.empty())
      return invalid_argument("model weights: layer " + std::to_string(i) + " has a " +
                              (l.k_scale.empty() ? "v_scale" : "k_scale") + " but no " +
                              (l.k_scale.empty() ? "k_scale" : "v_scale"));
  }
  *out = std::move(w);
  return Status::Ok();
}

Status load_model_folder(const std::string& dir, LlamaConfig* config, LlamaWeights* weights) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return invalid_argument("model folder " + dir + " does not exist");
  std::ifstream cf(fs::path(dir) / "config.json");
  if (!cf) return invalid_argument("model folder " + dir + " has no config.json");
  std::stringstream text;
  text << cf.rdbuf();
  FS_RETURN_IF_ERROR(parse_llama_config(text.str(), config));
  if (std::ifstream gf(fs::path(dir) / "generation_config.json"); gf) {  // generate's eos ids
    std::stringstream gtext;
    gtext << gf.rdbuf();
    FS_RETURN_IF_ERROR(apply_generation_config(gtext.str(), config));
  }
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) return invalid_argument("model folder " + dir + " has no *.safetensors");
  std::vector<SafetensorsFile> files(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) FS_RETURN_IF_ERROR(SafetensorsFile::open(paths[i], &files[i]));
  return load_weights(*config, files, weights);
}

std::vector<TensorToWrite> weights_as_tensors(const LlamaConfig& c, const LlamaWeights& w, DType dtype) {
  LlamaWeights& mutable_w = const_cast<LlamaWeights&>(w);  // tensor_list only takes addresses
  std::vector<TensorToWrite> out;
  for (Named& t : tensor_list(c, mutable_w)) out.push_back({t.name, t.shape, t.data->data(), dtype});
  for (int32_t i = 0; i < c.num_hidden_layers && i < static_cast<int32_t>(w.layers.size()); ++i) {
    const LayerWeights& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".self_attn.";
    if (!l.k_scale.empty())  // scales stay fp32, as FP8 checkpoints keep them
      out.push_back({p + "k_scale", {static_cast<int64_t>(l.k_scale.size())}, l.k_scale.data(), DType::kFloat32});
    if (!l.v_scale.empty())
      out.push_back({p + "v_scale", {static_cast<int64_t>(l.v_scale.size())}, l.v_scale.data(), DType::kFloat32});
  }
  return out;
}

}  // namespace flashserve::model
