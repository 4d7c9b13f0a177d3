// Fuzz target: config.json and generation_config.json as transformers writes them
// (server/model/config.h) from untrusted text: the first NUL-free half-split of the input is
// the config, the rest a generation config; an accepted config is validated.
#include <cstring>

#include "server/model/config.h"
#include "tests/fuzz/fuzz.h"

using namespace flashserve;
using namespace flashserve::model;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // "config\x01generation config": a separator byte splits the two files.
  const std::string text(reinterpret_cast<const char*>(data), size);
  const size_t cut = text.find('\x01');
  LlamaConfig c;
  const bool ok = parse_llama_config(text.substr(0, cut), &c).ok();
  fuzz::note(ok);
  if (!ok) return 0;
  (void)c.validate();
  if (cut != std::string::npos) (void)apply_generation_config(text.substr(cut + 1), &c);
  return 0;
}

namespace flashserve::fuzz {

std::vector<std::string> seeds() {
  const std::string base =
      R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 49152, "hidden_size": 576,
 "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
 "head_dim": 64, "rms_norm_eps": 1e-05, "max_position_embeddings": 8192, "tie_word_embeddings": true,
 "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16")";
  return {
      base + R"(, "rope_theta": 100000.0})",
      base + R"(, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
 "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})" +
          "\x01" + R"({"bos_token_id": 1, "eos_token_id": [2, 7], "do_sample": true})",
      base + R"(, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}})",
      base + R"(, "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}})" + "\x01" +
          R"({"eos_token_id": 5})",
  };
}

std::vector<std::string> dictionary() {
  return {"\"rope_scaling\"", "\"rope_parameters\"", "\"rope_type\"", "\"llama3\"", "\"yarn\"", "\"dynamic\"",
          "\"linear\"", "\"factor\"", "\"head_dim\"", "\"num_key_value_heads\"", "\"eos_token_id\"", "null", "true",
          "-1", "0", "1e400", "2147483648", "[", "]", "{", "}", ",", ":", "\"", "\\u0000", "\x01"};
}

}  // namespace flashserve::fuzz
