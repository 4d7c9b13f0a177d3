// Fuzz target: the GGUF reader (server/model/gguf.h) on untrusted bytes, and what the server
// does with a file it accepts: every metadata getter on every key, every tensor's bytes and
// its dequantization, the llama config, the weights of that config, the tokenizer's keys.
#include <cstring>

#include "server/model/config.h"
#include "server/model/gguf.h"
#include "server/model/gguf_weights.h"
#include "server/model/weights.h"
#include "tests/fuzz/fuzz.h"

using namespace flashserve;
using namespace flashserve::model;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  GgufFile f;
  if (!GgufFile::parse(std::vector<uint8_t>(data, data + size), "fuzz.gguf", &f).ok()) {
    fuzz::note(false);
    return 0;
  }
  fuzz::note(true);
  for (const GgufKV& kv : f.metadata()) {  // each getter on each key: a value or a clean error
    bool b;
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    std::string s;
    std::vector<std::string> ss;
    std::vector<int32_t> vi32;
    std::vector<int64_t> vi64;
    std::vector<float> vf32;
    (void)f.get_bool(kv.key, &b);
    (void)f.get_u32(kv.key, &u32);
    (void)f.get_i32(kv.key, &i32);
    (void)f.get_u64(kv.key, &u64);
    (void)f.get_i64(kv.key, &i64);
    (void)f.get_f32(kv.key, &f32);
    (void)f.get_f64(kv.key, &f64);
    (void)f.get_string(kv.key, &s);
    (void)f.get_string_array(kv.key, &ss);
    (void)f.get_i32_array(kv.key, &vi32);
    (void)f.get_i64_array(kv.key, &vi64);
    (void)f.get_f32_array(kv.key, &vf32);
  }
  for (const GgufTensorInfo& t : f.tensors()) {
    const uint8_t* bytes = nullptr;
    uint64_t n = 0;
    if (f.tensor_data(t.name, &bytes, &n).ok() && n > 0) {
      volatile uint8_t sink = bytes[0] ^ bytes[n - 1];  // the range is inside the file
      (void)sink;
    }
    std::vector<int64_t> shape(t.dims.rbegin(), t.dims.rend());
    int64_t numel = 1;
    for (int64_t d : shape) numel = d > 0 && numel <= (int64_t{1} << 22) / d ? numel * d : (int64_t{1} << 23);
    std::vector<float> out;
    if (numel <= (int64_t{1} << 22)) (void)f.read_f32(t.name, shape, &out);  // bounded work an input
  }
  LlamaConfig c;
  if (gguf_llama_config(f, &c).ok() && c.validate().ok() &&
      static_cast<int64_t>(c.vocab_size) * c.hidden_size <= (int64_t{1} << 22) && c.num_hidden_layers <= 8) {
    LlamaWeights w;
    (void)load_gguf_weights(f, c, &w);
  }
  return 0;
}

namespace flashserve::fuzz {

std::vector<std::string> seeds() {
  LlamaConfig c;
  (void)synthetic_preset("tiny", &c);
  c.num_hidden_layers = 1;  // a small file: more inputs a second
  LlamaWeights w;
  (void)synthetic_weights(c, 3, &w);
  std::vector<std::string> out;
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16}) {
    GgufWriter g;
    add_gguf_model(&g, c, w, t);
    g.set_string("tokenizer.ggml.model", "gpt2");
    g.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab", "\xc4\xa0"});
    g.set_string_array("tokenizer.ggml.merges", {"a b"});
    g.set_i32_array("tokenizer.ggml.token_type", {1, 1, 1, 1});
    const std::vector<uint8_t> bytes = g.serialize(t == GgmlType::kF32 ? 3 : 2);
    out.emplace_back(bytes.begin(), bytes.end());
  }
  return out;
}

std::vector<std::string> dictionary() {
  return {"GGUF", "general.alignment", "llama.block_count", "llama.embedding_length", "llama.attention.head_count",
          "llama.rope.freq_base", "tokenizer.ggml.tokens", "token_embd.weight", "blk.0.attn_q.weight",
          std::string("\x20\0\0\0", 4), std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8)};
}

}  // namespace flashserve::fuzz
