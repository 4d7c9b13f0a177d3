#include "server/model/config.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace flashserve::model {

Status LlamaConfig::validate() const {
  if (vocab_size <= 0 || hidden_size <= 0 || intermediate_size <= 0 || num_hidden_layers <= 0 ||
      num_attention_heads <= 0 || num_key_value_heads <= 0 || head_dim <= 0)
    return invalid_argument("model config: sizes must be positive");
  if (num_attention_heads % num_key_value_heads)
    return invalid_argument("model config: num_attention_heads is not a multiple of num_key_value_heads");
  if (head_dim % 2) return invalid_argument("model config: head_dim must be even (rotary embeddings)");
  if (!(rms_norm_eps > 0) || !(rope_theta > 0)) return invalid_argument("model config: rms_norm_eps and rope_theta must be > 0");
  if (max_position_embeddings <= 0) return invalid_argument("model config: max_position_embeddings must be > 0");
  return Status::Ok();
}

std::vector<double> LlamaConfig::inv_freq() const {
  const int half = head_dim / 2;
  std::vector<double> f(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) f[i] = 1.0 / std::pow(rope_theta, 2.0 * i / head_dim);
  if (rope_scaling.linear) {
    for (double& x : f) x /= rope_scaling.factor;
    return f;
  }
  if (!rope_scaling.llama3) return f;
  // Llama 3.1: long wavelengths slowed by `factor`, short ones kept, a smooth blend between.
  const RopeScaling& s = rope_scaling;
  const double old_ctx = static_cast<double>(s.original_max_position_embeddings);
  const double low_wavelen = old_ctx / s.low_freq_factor, high_wavelen = old_ctx / s.high_freq_factor;
  for (double& x : f) {
    const double wavelen = 2 * M_PI / x;
    if (wavelen < high_wavelen) continue;
    if (wavelen > low_wavelen) {
      x /= s.factor;
    } else {
      const double smooth = (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      x = (1 - smooth) * x / s.factor + smooth * x;
    }
  }
  return f;
}

namespace {

// An integer JSON value that fits int32_t (nlohmann's get<int32_t> truncates one that does not:
// 4294967303 would read as 7).
bool json_int32(const nlohmann::json& v, int32_t* out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT32_MAX)) return false;
    *out = static_cast<int32_t>(u);
    return true;
  }
  if (!v.is_number_integer()) return false;
  const int64_t i = v.get<int64_t>();
  if (i < INT32_MIN || i > INT32_MAX) return false;
  *out = static_cast<int32_t>(i);
  return true;
}

}  // namespace

Status parse_llama_config(const std::string& text, LlamaConfig* out) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("config.json is not a JSON object");
  LlamaConfig c;
  auto get_int = [&](const char* key, int32_t* v, bool required) -> Status {
    if (!j.contains(key) || j[key].is_null()) {
      return required ? invalid_argument(std::string("config.json: missing ") + key) : Status::Ok();
    }
    if (!json_int32(j[key], v))
      return invalid_argument(std::string("config.json: ") + key + " is not an integer of 32 bits");
    return Status::Ok();
  };
  FS_RETURN_IF_ERROR(get_int("vocab_size", &c.vocab_size, true));
  FS_RETURN_IF_ERROR(get_int("hidden_size", &c.hidden_size, true));
  FS_RETURN_IF_ERROR(get_int("intermediate_size", &c.intermediate_size, true));
  FS_RETURN_IF_ERROR(get_int("num_hidden_layers", &c.num_hidden_layers, true));
  FS_RETURN_IF_ERROR(get_int("num_attention_heads", &c.num_attention_heads, true));
  c.num_key_value_heads = c.num_attention_heads;
  FS_RETURN_IF_ERROR(get_int("num_key_value_heads", &c.num_key_value_heads, false));
  FS_RETURN_IF_ERROR(get_int("max_position_embeddings", &c.max_position_embeddings, false));
  c.head_dim = c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
  FS_RETURN_IF_ERROR(get_int("head_dim", &c.head_dim, false));
  if (j.contains("rms_norm_eps") && j["rms_norm_eps"].is_number()) c.rms_norm_eps = j["rms_norm_eps"].get<double>();
  if (j.contains("tie_word_embeddings") && j["tie_word_embeddings"].is_boolean())
    c.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
  // What the forward does not compute: refused by name.
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    if (j.contains(key) && j[key].is_boolean() && j[key].get<bool>())
      return unsupported(std::string("config.json: ") + key + " is true; biases are not implemented");
  }
  for (const char* key : {"hidden_act", "hidden_activation"}) {
    if (j.contains(key) && !(j[key].is_string() && j[key].get<std::string>() == "silu"))
      return unsupported(std::string("config.json: ") + key + " " + j[key].dump() + " is not supported (silu is)");
  }
  if (j.contains("model_type") && j["model_type"].is_string()) {
    const std::string type = j["model_type"].get<std::string>();
    // Mistral is Llama's forward unless it slides a window over the keys.
    const bool windowed = j.contains("sliding_window") && !j["sliding_window"].is_null();
    if (type != "llama" && !(type == "mistral" && !windowed))
      return unsupported("config.json: model_type " + type + (windowed ? " with sliding_window" : "") +
                         " is not supported (llama; mistral without sliding_window)");
  }
  // Rotary: transformers >= 5 writes rope_parameters {rope_type, rope_theta, ...} and drops the
  // top-level rope_theta and rope_scaling; older files have those. rope_parameters wins.
  if (j.contains("rope_theta") && j["rope_theta"].is_number()) c.rope_theta = j["rope_theta"].get<double>();
  const nlohmann::json* rope = nullptr;
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    rope = &j["rope_parameters"];
    if (rope->contains("rope_theta")) {
      if (!(*rope)["rope_theta"].is_number()) return invalid_argument("config.json: rope_parameters.rope_theta is not a number");
      c.rope_theta = (*rope)["rope_theta"].get<double>();
    }
  } else if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    rope = &j["rope_scaling"];
  } else if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    return invalid_argument("config.json: rope_scaling is neither an object nor null");
  }
  if (rope != nullptr) {
    const auto& r = *rope;
    std::string type = "default";
    for (const char* key : {"type", "rope_type"}) {  // rope_type wins over the older "type"
      if (!r.contains(key) || r[key].is_null()) continue;
      if (!r[key].is_string()) return invalid_argument(std::string("config.json: rope ") + key + " is not a string");
      type = r[key].get<std::string>();
    }
    auto number = [&](const char* key, double fallback, double* v) -> Status {
      if (!r.contains(key) || r[key].is_null()) {
        *v = fallback;
        return Status::Ok();
      }
      if (!r[key].is_number()) return invalid_argument(std::string("config.json: rope ") + key + " is not a number");
      *v = r[key].get<double>();
      return Status::Ok();
    };
    if (type == "llama3") {
      c.rope_scaling.llama3 = true;
      double ctx = 8192;
      FS_RETURN_IF_ERROR(number("factor", 8.0, &c.rope_scaling.factor));
      FS_RETURN_IF_ERROR(number("low_freq_factor", 1.0, &c.rope_scaling.low_freq_factor));
      FS_RETURN_IF_ERROR(number("high_freq_factor", 4.0, &c.rope_scaling.high_freq_factor));
      FS_RETURN_IF_ERROR(number("original_max_position_embeddings", 8192, &ctx));
      c.rope_scaling.original_max_position_embeddings = static_cast<int64_t>(ctx);
      if (!(c.rope_scaling.factor > 0) || !(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor) ||
          !(ctx > 0))
        return invalid_argument("config.json: llama3 rope needs factor > 0, high_freq_factor > low_freq_factor and "
                                "original_max_position_embeddings > 0");
    } else if (type == "linear") {
      c.rope_scaling.linear = true;
      FS_RETURN_IF_ERROR(number("factor", 1.0, &c.rope_scaling.factor));
      if (!(c.rope_scaling.factor > 0)) return invalid_argument("config.json: linear rope needs factor > 0");
    } else if (type != "default") {
      return unsupported("config.json: rope_type " + type + " is not supported (default, linear, llama3)");
    }
  }
  if (j.contains("eos_token_id")) {
    const auto& e = j["eos_token_id"];
    int32_t id = 0;
    if (e.is_number_integer() && json_int32(e, &id)) c.eos_token_ids.push_back(id);
    if (e.is_array())
      for (const auto& x : e)
        if (x.is_number_integer() && json_int32(x, &id)) c.eos_token_ids.push_back(id);
  }
  FS_RETURN_IF_ERROR(c.validate());
  *out = c;
  return Status::Ok();
}

Status apply_generation_config(const std::string& text, LlamaConfig* out) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("generation_config.json is not a JSON object");
  if (!j.contains("eos_token_id") || j["eos_token_id"].is_null()) return Status::Ok();
  const auto& e = j["eos_token_id"];
  std::vector<int32_t> ids;
  int32_t id = 0;
  auto outside = [&](const nlohmann::json& x) {
    return out_of_range("generation_config.json: eos_token_id " + x.dump() + " is outside the vocabulary");
  };
  if (e.is_number_integer()) {
    if (!json_int32(e, &id)) return outside(e);
    ids.push_back(id);
  } else if (e.is_array()) {
    for (const auto& x : e) {
      if (!x.is_number_integer()) return invalid_argument("generation_config.json: eos_token_id holds a non-integer");
      if (!json_int32(x, &id)) return outside(x);
      ids.push_back(id);
    }
  } else {
    return invalid_argument("generation_config.json: eos_token_id is neither an integer nor a list");
  }
  for (int32_t id : ids)
    if (id < 0 || id >= out->vocab_size)
      return out_of_range("generation_config.json: eos_token_id " + std::to_string(id) + " is outside the vocabulary");
  out->eos_token_ids = ids;
  return Status::Ok();
}

Status synthetic_preset(const std::string& name, LlamaConfig* out) {
  LlamaConfig c;
  if (name == "tiny") {
    c.vocab_size = 512;
    c.hidden_size = 128;
    c.intermediate_size = 344;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 32;
    c.max_position_embeddings = 4096;
    c.eos_token_ids = {2};
  } else if (name == "llama3-8b") {
    c.vocab_size = 128256;
    c.hidden_size = 4096;
    c.intermediate_size = 14336;
    c.num_hidden_layers = 32;
    c.num_attention_heads = 32;
    c.num_key_value_heads = 8;
    c.head_dim = 128;
    c.rms_norm_eps = 1e-5;
    c.rope_theta = 500000.0;
    c.rope_scaling.llama3 = true;
    c.max_position_embeddings = 131072;
    c.eos_token_ids = {128001, 128009};
  } else {
    return invalid_argument("unknown synthetic preset '" + name + "' (tiny, llama3-8b)");
  }
  FS_RETURN_IF_ERROR(c.validate());
  *out = c;
  return Status::Ok();
}

}  // namespace flashserve::model
