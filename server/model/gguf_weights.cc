#include "server/model/gguf_weights.h"

#include <cstring>
#include <filesystem>
#include <fstream>

namespace flashserve::model {

namespace {

// A required integer key that must be a positive int32.
Status positive_i32(const GgufFile& f, const std::string& key, int32_t* out) {
  FS_RETURN_IF_ERROR(f.get_i32(key, out));
  if (*out <= 0) return invalid_argument("gguf " + f.name() + ": " + key + " = " + std::to_string(*out) + " must be > 0");
  return Status::Ok();
}

// The same, when the key may be absent (then *out keeps its value).
Status optional_positive_i32(const GgufFile& f, const std::string& key, int32_t* out) {
  if (!f.has(key)) return Status::Ok();
  return positive_i32(f, key, out);
}

// Rows (i, j) -> (j, i) inside each head: `to_interleaved` does the converter's permutation.
void permute_rows(std::vector<float>* w, int32_t num_heads, int32_t head_dim, int64_t cols, bool to_interleaved) {
  const int64_t half = head_dim / 2;
  std::vector<float> out(w->size());
  for (int64_t h = 0; h < num_heads; ++h) {
    for (int64_t j = 0; j < 2; ++j) {
      for (int64_t i = 0; i < half; ++i) {
        const int64_t hf = h * head_dim + j * half + i, gg = h * head_dim + 2 * i + j;
        const int64_t dst = to_interleaved ? gg : hf, src = to_interleaved ? hf : gg;
        std::memcpy(&out[dst * cols], &(*w)[src * cols], static_cast<size_t>(cols) * sizeof(float));
      }
    }
  }
  *w = std::move(out);
}

struct GgufTensor {
  std::string name;
  std::vector<int64_t> shape;  // outermost first
  std::vector<float>* data;
  int32_t qk_heads;  // > 0: Q or K, rows to un-permute over this many heads
};

std::vector<GgufTensor> gguf_tensor_list(const LlamaConfig& c, LlamaWeights& w) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t Q = int64_t{c.num_attention_heads} * c.head_dim, KV = int64_t{c.num_key_value_heads} * c.head_dim;
  std::vector<GgufTensor> t;
  w.layers.resize(static_cast<size_t>(c.num_hidden_layers));
  t.push_back({"token_embd.weight", {V, H}, &w.embed, 0});
  for (int32_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    t.push_back({p + "attn_norm.weight", {H}, &l.input_norm, 0});
    t.push_back({p + "attn_q.weight", {Q, H}, &l.wq, c.num_attention_heads});
    t.push_back({p + "attn_k.weight", {KV, H}, &l.wk, c.num_key_value_heads});
    t.push_back({p + "attn_v.weight", {KV, H}, &l.wv, 0});
    t.push_back({p + "attn_output.weight", {H, Q}, &l.wo, 0});
    t.push_back({p + "ffn_norm.weight", {H}, &l.post_norm, 0});
    t.push_back({p + "ffn_gate.weight", {I, H}, &l.w_gate, 0});
    t.push_back({p + "ffn_up.weight", {I, H}, &l.w_up, 0});
    t.push_back({p + "ffn_down.weight", {H, I}, &l.w_down, 0});
  }
  t.push_back({"output_norm.weight", {H}, &w.final_norm, 0});
  if (!c.tie_word_embeddings) t.push_back({"output.weight", {V, H}, &w.lm_head, 0});
  return t;
}

}  // namespace

void gguf_permute_qk_rows(std::vector<float>* w, int32_t num_heads, int32_t head_dim, int64_t cols) {
  permute_rows(w, num_heads, head_dim, cols, true);
}
void gguf_unpermute_qk_rows(std::vector<float>* w, int32_t num_heads, int32_t head_dim, int64_t cols) {
  permute_rows(w, num_heads, head_dim, cols, false);
}

Status gguf_llama_config(const GgufFile& f, LlamaConfig* out) {
  const std::string where = "gguf " + f.name() + ": ";
  std::string arch;
  FS_RETURN_IF_ERROR(f.get_string("general.architecture", &arch));
  if (arch != "llama")
    return unsupported(where + "general.architecture is '" + arch + "'; only llama is supported");
  const std::string a = "llama.";
  LlamaConfig c;
  FS_RETURN_IF_ERROR(positive_i32(f, a + "block_count", &c.num_hidden_layers));
  FS_RETURN_IF_ERROR(positive_i32(f, a + "embedding_length", &c.hidden_size));
  FS_RETURN_IF_ERROR(positive_i32(f, a + "feed_forward_length", &c.intermediate_size));
  FS_RETURN_IF_ERROR(positive_i32(f, a + "attention.head_count", &c.num_attention_heads));
  c.num_key_value_heads = c.num_attention_heads;
  FS_RETURN_IF_ERROR(optional_positive_i32(f, a + "attention.head_count_kv", &c.num_key_value_heads));
  c.head_dim = c.hidden_size / c.num_attention_heads;
  FS_RETURN_IF_ERROR(optional_positive_i32(f, a + "attention.key_length", &c.head_dim));
  if (f.has(a + "attention.value_length")) {
    int32_t value_length = 0;
    FS_RETURN_IF_ERROR(f.get_i32(a + "attention.value_length", &value_length));
    if (value_length != c.head_dim)
      return unsupported(where + "llama.attention.value_length " + std::to_string(value_length) +
                         " differs from the key length " + std::to_string(c.head_dim) + " (not supported)");
  }
  if (f.has(a + "rope.dimension_count")) {
    int32_t rot = 0;
    FS_RETURN_IF_ERROR(f.get_i32(a + "rope.dimension_count", &rot));
    if (rot != c.head_dim)
      return unsupported(where + "llama.rope.dimension_count " + std::to_string(rot) + " is not head_dim " +
                         std::to_string(c.head_dim) + " (partial rotary is not supported)");
  }
  if (f.has(a + "expert_count")) {
    uint32_t experts = 0;
    FS_RETURN_IF_ERROR(f.get_u32(a + "expert_count", &experts));
    if (experts > 0) return unsupported(where + "llama.expert_count " + std::to_string(experts) + ": MoE is not supported");
  }
  if (f.has(a + "rope.freq_base")) FS_RETURN_IF_ERROR(f.get_f64(a + "rope.freq_base", &c.rope_theta));
  FS_RETURN_IF_ERROR(f.get_f64(a + "attention.layer_norm_rms_epsilon", &c.rms_norm_eps));
  FS_RETURN_IF_ERROR(positive_i32(f, a + "context_length", &c.max_position_embeddings));
  // Rope scaling: config.cc implements llama3's, which llama.cpp stores not as keys but as a
  // rope_freqs.weight tensor of per-frequency factors; neither that nor linear/yarn is read here.
  if (f.has(a + "rope.scaling.type")) {
    std::string type;
    FS_RETURN_IF_ERROR(f.get_string(a + "rope.scaling.type", &type));
    if (type != "none") return unsupported(where + "llama.rope.scaling.type '" + type + "' is not supported");
  }
  if (f.has(a + "rope.scaling.factor")) {
    double factor = 0;
    FS_RETURN_IF_ERROR(f.get_f64(a + "rope.scaling.factor", &factor));
    if (factor != 1.0 && factor != 0.0)
      return unsupported(where + "llama.rope.scaling.factor " + std::to_string(factor) + " is not supported");
  }
  if (f.has_tensor("rope_freqs.weight"))
    return unsupported(where + "rope_freqs.weight (llama3-style rope scaling factors) is not supported");
  if (f.has(a + "vocab_size")) {
    FS_RETURN_IF_ERROR(positive_i32(f, a + "vocab_size", &c.vocab_size));
  } else if (const GgufKV* tokens = f.find("tokenizer.ggml.tokens")) {
    if (tokens->type != GgufValueType::kArray || tokens->count == 0 || tokens->count > (1u << 30))
      return invalid_argument(where + "no llama.vocab_size and tokenizer.ggml.tokens is not a token array");
    c.vocab_size = static_cast<int32_t>(tokens->count);
  } else {
    return invalid_argument(where + "neither llama.vocab_size nor tokenizer.ggml.tokens gives the vocabulary size");
  }
  if (f.has("tokenizer.ggml.eos_token_id")) {
    int32_t eos = 0;
    FS_RETURN_IF_ERROR(f.get_i32("tokenizer.ggml.eos_token_id", &eos));
    c.eos_token_ids.push_back(eos);
  }
  c.tie_word_embeddings = !f.has_tensor("output.weight");
  if (Status s = c.validate(); !s.ok()) return invalid_argument(where + s.message());
  *out = c;
  return Status::Ok();
}

Status load_gguf_weights(const GgufFile& f, const LlamaConfig& c, LlamaWeights* out) {
  FS_RETURN_IF_ERROR(c.validate());
  LlamaWeights w;
  for (GgufTensor& t : gguf_tensor_list(c, w)) {
    if (!f.has_tensor(t.name)) return invalid_argument("gguf " + f.name() + ": no tensor " + t.name);
    FS_RETURN_IF_ERROR(f.read_f32(t.name, t.shape, t.data));
    if (t.qk_heads > 0) gguf_unpermute_qk_rows(t.data, t.qk_heads, c.head_dim, c.hidden_size);
  }
  *out = std::move(w);
  return Status::Ok();
}

Status load_gguf_model(const std::string& path, LlamaConfig* config, LlamaWeights* weights) {
  GgufFile f;
  FS_RETURN_IF_ERROR(GgufFile::open(path, &f));
  LlamaConfig c;
  FS_RETURN_IF_ERROR(gguf_llama_config(f, &c));
  FS_RETURN_IF_ERROR(load_gguf_weights(f, c, weights));
  *config = c;
  return Status::Ok();
}

bool is_gguf_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  if (std::filesystem::path(path).extension() == ".gguf") return true;
  char magic[4] = {};
  std::ifstream in(path, std::ios::binary);
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

void add_gguf_model(GgufWriter* g, const LlamaConfig& c, const LlamaWeights& w, GgmlType stored_as) {
  g->set_string("general.architecture", "llama");
  g->set_u32("llama.block_count", static_cast<uint32_t>(c.num_hidden_layers));
  g->set_u32("llama.context_length", static_cast<uint32_t>(c.max_position_embeddings));
  g->set_u32("llama.embedding_length", static_cast<uint32_t>(c.hidden_size));
  g->set_u32("llama.feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  g->set_u32("llama.attention.head_count", static_cast<uint32_t>(c.num_attention_heads));
  g->set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(c.num_key_value_heads));
  g->set_u32("llama.attention.key_length", static_cast<uint32_t>(c.head_dim));
  g->set_u32("llama.rope.dimension_count", static_cast<uint32_t>(c.head_dim));
  g->set_f32("llama.rope.freq_base", static_cast<float>(c.rope_theta));
  g->set_f32("llama.attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  g->set_u32("llama.vocab_size", static_cast<uint32_t>(c.vocab_size));
  if (!c.eos_token_ids.empty()) g->set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(c.eos_token_ids[0]));
  LlamaWeights copy = w;  // Q and K are permuted in the copy
  for (GgufTensor& t : gguf_tensor_list(c, copy)) {
    if (t.qk_heads > 0) gguf_permute_qk_rows(t.data, t.qk_heads, c.head_dim, c.hidden_size);
    // Norms stay F32, as llama.cpp's converter keeps 1-D tensors.
    g->add_tensor_f32(t.name, t.shape, t.data->data(), t.shape.size() == 1 ? GgmlType::kF32 : stored_as);
  }
}

Status write_gguf_model(const std::string& path, const LlamaConfig& c, const LlamaWeights& w, GgmlType stored_as) {
  FS_RETURN_IF_ERROR(c.validate());
  GgufWriter g;
  add_gguf_model(&g, c, w, stored_as);
  return g.write(path);
}

}  // namespace flashserve::model
