// Tokenizer::from_hf_json: a Hugging Face tokenizer.json (model BPE, byte-level) and its
// tokenizer_config.json. What the format allows but a byte-level BPE tokenizer here does not
// use (normalizers, WordPiece, Metaspace, ...) is UNSUPPORTED with its name, never ignored.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "server/text/tokenizer.h"
#include "server/text/tokenizer_impl.h"

namespace flashserve::text {
namespace {

using nlohmann::json;

std::string type_of(const json& j) { return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : ""; }

bool flag(const json& j, const char* key, bool fallback) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

Status parse_pre_tokenizer(const json& j, PreTokenizer* pre) {
  if (j.is_null()) return Status::Ok();
  const std::string type = type_of(j);
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) {
      return invalid_argument("tokenizer.json: pre_tokenizer Sequence without a pretokenizers list");
    }
    for (const json& step : j["pretokenizers"]) FS_RETURN_IF_ERROR(parse_pre_tokenizer(step, pre));
    return Status::Ok();
  }
  if (type == "ByteLevel") return pre->add_byte_level(flag(j, "add_prefix_space", true), flag(j, "use_regex", true));
  if (type == "Digits") return pre->add_digits(flag(j, "individual_digits", false));
  if (type == "Split") {
    const json& pattern = j.value("pattern", json());
    SplitBehavior behavior;
    FS_RETURN_IF_ERROR(parse_split_behavior(j.value("behavior", std::string("Isolated")), &behavior));
    const bool invert = flag(j, "invert", false);
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
      return pre->add_split(pattern["Regex"].get<std::string>(), true, behavior, invert);
    }
    if (pattern.contains("String") && pattern["String"].is_string()) {
      return pre->add_split(pattern["String"].get<std::string>(), false, behavior, invert);
    }
    return invalid_argument("tokenizer.json: Split pre-tokenizer without a Regex or String pattern");
  }
  return unsupported("tokenizer.json: pre-tokenizer '" + type + "' is not supported (ByteLevel, Split, Digits, Sequence are)");
}

Status check_normalizer(const json& j) {
  if (j.is_null()) return Status::Ok();
  if (type_of(j) == "Sequence" && j.contains("normalizers") && j["normalizers"].is_array()) {
    for (const json& n : j["normalizers"]) FS_RETURN_IF_ERROR(check_normalizer(n));
    return Status::Ok();
  }
  return unsupported("tokenizer.json: normalizer '" + type_of(j) + "' is not supported (a byte-level BPE tokenizer without one is)");
}

Status check_decoder(const json& j) {
  const std::string type = type_of(j);
  if (type == "ByteLevel") return Status::Ok();
  if (type == "Sequence" && j.contains("decoders") && j["decoders"].is_array() && j["decoders"].size() == 1) {
    return check_decoder(j["decoders"][0]);
  }
  return unsupported("tokenizer.json: decoder '" + (j.is_null() ? std::string("null") : type) +
                     "' is not supported (ByteLevel is)");
}

// The ids a post-processor puts before and after a single sequence.
Status parse_post_processor(const json& j, const TokenizerSpec& spec, std::vector<int32_t>* prefix,
                            std::vector<int32_t>* suffix) {
  if (j.is_null()) return Status::Ok();
  const std::string type = type_of(j);
  if (type == "ByteLevel") return Status::Ok();  // offsets only
  if (type == "Sequence") {
    for (const json& p : j.value("processors", json::array())) FS_RETURN_IF_ERROR(parse_post_processor(p, spec, prefix, suffix));
    return Status::Ok();
  }
  if (type == "TemplateProcessing") {
    const json& special = j.value("special_tokens", json::object());
    bool seen_sequence = false;
    for (const json& item : j.value("single", json::array())) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      if (!item.contains("SpecialToken")) return invalid_argument("tokenizer.json: TemplateProcessing item " + item.dump());
      const std::string name = item["SpecialToken"].value("id", std::string());
      if (!special.contains(name) || !special[name].contains("ids")) {
        return invalid_argument("tokenizer.json: TemplateProcessing names '" + name + "' without its ids");
      }
      for (const json& id : special[name]["ids"]) (seen_sequence ? suffix : prefix)->push_back(id.get<int32_t>());
    }
    return Status::Ok();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {  // cls $A sep
    if (!j.contains("cls") || !j.contains("sep")) return invalid_argument("tokenizer.json: " + type + " without cls/sep");
    prefix->push_back(j["cls"][1].get<int32_t>());
    suffix->push_back(j["sep"][1].get<int32_t>());
    return Status::Ok();
  }
  return unsupported("tokenizer.json: post-processor '" + type + "' is not supported");
}

// tokenizer_config.json's bos_token / eos_token: a string, or an object with "content".
std::string config_token(const json& config, const char* key) {
  if (!config.contains(key)) return "";
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

Status parse_model(const json& model, TokenizerSpec* spec, std::unordered_map<std::string, int32_t>* vocab) {
  const std::string type = type_of(model);
  if (!type.empty() && type != "BPE") return unsupported("tokenizer.json: model '" + type + "' is not supported (BPE is)");
  if (!model.contains("vocab") || !model["vocab"].is_object() || !model.contains("merges") || !model["merges"].is_array()) {
    return invalid_argument("tokenizer.json: the BPE model needs a vocab object and a merges list");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      return unsupported(std::string("tokenizer.json: BPE ") + key + " is not supported by a byte-level tokenizer");
    }
  }
  if (model.contains("dropout") && model["dropout"].is_number() && model["dropout"].get<double>() > 0) {
    return unsupported("tokenizer.json: BPE dropout is not supported");
  }
  int32_t max_id = -1;
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > INT32_MAX - 1) {
      return invalid_argument("tokenizer.json: vocab entry '" + it.key() + "' has no valid id");
    }
    const int32_t id = it.value().get<int32_t>();
    (*vocab)[it.key()] = id;
    max_id = std::max(max_id, id);
  }
  spec->tokens.resize(max_id + 1);
  spec->present.assign(max_id + 1, 0);
  spec->in_model.assign(max_id + 1, 0);
  for (const auto& [token, id] : *vocab) {
    spec->tokens[id] = token;
    spec->present[id] = 1;
    spec->in_model[id] = 1;
  }
  // Merges: "left right" strings (the older format) or [left, right] pairs.
  spec->merges.reserve(model["merges"].size());
  size_t rank = 0;
  for (const json& m : model["merges"]) {
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ', 1);
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return invalid_argument("tokenizer.json: merge " + std::to_string(rank) + " '" + s + "' is not two tokens");
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return invalid_argument("tokenizer.json: merge " + std::to_string(rank) + " is neither \"a b\" nor [a, b]");
    }
    const auto l = vocab->find(left), r = vocab->find(right);
    if (l == vocab->end() || r == vocab->end()) {
      return invalid_argument("tokenizer.json: merge " + std::to_string(rank) + " names a token not in the vocab");
    }
    spec->merges.emplace_back(l->second, r->second);
    ++rank;
  }
  spec->bpe.ignore_merges = flag(model, "ignore_merges", false);
  spec->bpe.fuse_unk = flag(model, "fuse_unk", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const auto it = vocab->find(model["unk_token"].get<std::string>());
    if (it == vocab->end()) return invalid_argument("tokenizer.json: unk_token is not in the vocab");
    spec->bpe.unk_id = it->second;
  }
  return Status::Ok();
}

}  // namespace

Status Tokenizer::from_hf_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json, Tokenizer* out) {
  json root, config;
  try {
    root = json::parse(tokenizer_json);
    if (!tokenizer_config_json.empty()) config = json::parse(tokenizer_config_json);
  } catch (const json::exception& e) {
    return invalid_argument(std::string("tokenizer.json / tokenizer_config.json: ") + e.what());
  }
  try {
    if (!root.is_object() || !root.contains("model")) return invalid_argument("tokenizer.json: no model");
    TokenizerSpec spec;
    std::unordered_map<std::string, int32_t> vocab;
    FS_RETURN_IF_ERROR(parse_model(root["model"], &spec, &vocab));
    FS_RETURN_IF_ERROR(check_normalizer(root.value("normalizer", json())));
    FS_RETURN_IF_ERROR(parse_pre_tokenizer(root.value("pre_tokenizer", json()), &spec.pre));
    FS_RETURN_IF_ERROR(check_decoder(root.value("decoder", json())));
    // Added tokens: ids may lie past the model's vocabulary.
    for (const json& a : root.value("added_tokens", json::array())) {
      AddedToken t;
      t.id = a.at("id").get<int32_t>();
      t.content = a.at("content").get<std::string>();
      t.special = flag(a, "special", false);
      t.lstrip = flag(a, "lstrip", false);
      t.rstrip = flag(a, "rstrip", false);
      t.single_word = flag(a, "single_word", false);
      t.normalized = flag(a, "normalized", !t.special);
      if (t.id < 0 || t.id > (1 << 30)) return out_of_range("tokenizer.json: added token id " + std::to_string(t.id));
      if (t.id >= static_cast<int32_t>(spec.tokens.size())) {
        spec.tokens.resize(t.id + 1);
        spec.present.resize(t.id + 1, 0);
        spec.in_model.resize(t.id + 1, 0);
      }
      if (!spec.present[t.id]) {
        spec.tokens[t.id] = t.content;
        spec.present[t.id] = 1;
      }
      spec.added.push_back(std::move(t));
    }
    FS_RETURN_IF_ERROR(parse_post_processor(root.value("post_processor", json()), spec, &spec.prefix_ids, &spec.suffix_ids));
    // bos/eos from tokenizer_config.json; without one, a post-processor's single leading id
    // is the bos.
    auto id_of = [&](const std::string& text) -> int32_t {
      for (const AddedToken& t : spec.added) {
        if (t.content == text) return t.id;
      }
      const auto it = vocab.find(text);
      return it == vocab.end() ? -1 : it->second;
    };
    const std::string bos = config_token(config, "bos_token"), eos = config_token(config, "eos_token"),
                      pad = config_token(config, "pad_token");
    if (!bos.empty()) spec.bos = id_of(bos);
    else if (spec.prefix_ids.size() == 1) spec.bos = spec.prefix_ids[0];
    if (!eos.empty()) spec.eos = id_of(eos);
    if (!pad.empty()) spec.pad = id_of(pad);
    if (config.contains("chat_template")) {
      const json& ct = config["chat_template"];
      if (ct.is_string()) {
        spec.chat_template = ct.get<std::string>();
      } else if (ct.is_array()) {  // [{"name": "default", "template": ...}, ...]
        for (const json& named : ct) {
          if (named.value("name", std::string()) == "default" || spec.chat_template.empty()) {
            spec.chat_template = named.value("template", std::string());
          }
        }
      }
    }
    Tokenizer tok;
    FS_RETURN_IF_ERROR(finish_tokenizer(std::move(spec), tok.impl_.get()));
    *out = std::move(tok);
    return Status::Ok();
  } catch (const json::exception& e) {
    return invalid_argument(std::string("tokenizer.json: ") + e.what());
  }
}

Status Tokenizer::from_hf_file(const std::string& path, Tokenizer* out) {
  auto read = [](const std::string& p, std::string* text) {
    std::ifstream f(p, std::ios::binary);
    if (!f) return false;
    std::ostringstream ss;
    ss << f.rdbuf();
    *text = ss.str();
    return true;
  };
  std::string tokenizer_json, config_json;
  if (!read(path, &tokenizer_json)) return invalid_argument("cannot read " + path);
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  read(dir + "/tokenizer_config.json", &config_json);  // optional
  // transformers writes the chat template beside the config (chat_template.jinja) lately.
  Status st = from_hf_json(tokenizer_json, config_json, out);
  if (!st.ok()) return Status(st.code(), path + ": " + st.message());
  std::string jinja;
  if (out->chat_template().empty() && read(dir + "/chat_template.jinja", &jinja)) {
    out->impl_->chat_template = jinja;
  }
  return Status::Ok();
}

}  // namespace flashserve::text
