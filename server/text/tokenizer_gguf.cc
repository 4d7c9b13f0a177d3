// Tokenizer::load_from_gguf_metadata: a GGUF file's tokenizer.ggml.* keys, read the way
// llama.cpp reads them for a "gpt2" (byte-level BPE) tokenizer: control tokens (type 3) are
// special added tokens, user-defined ones (type 4) plain added tokens, both matched in text
// before BPE; the pre-tokenizer comes from tokenizer.ggml.pre by name.
#include <unordered_map>

#include "server/text/tokenizer.h"
#include "server/text/tokenizer_impl.h"

namespace flashserve::text {
namespace {

constexpr int32_t kTypeNormal = 1, kTypeControl = 3, kTypeUserDefined = 4;

}  // namespace

Status Tokenizer::load_from_gguf_metadata(const GgufTokenizerMetadata& meta, Tokenizer* out) {
  if (meta.model != "gpt2") {
    return unsupported("tokenizer.ggml.model '" + meta.model + "' is not supported (gpt2, byte-level BPE, is)");
  }
  const size_t n = meta.tokens.size();
  if (n == 0) return invalid_argument("tokenizer.ggml.tokens is empty");
  if (n > (1u << 30)) return invalid_argument("tokenizer.ggml.tokens: too many tokens");
  if (!meta.token_type.empty() && meta.token_type.size() != n) {
    return invalid_argument("tokenizer.ggml.token_type has " + std::to_string(meta.token_type.size()) +
                            " entries for " + std::to_string(n) + " tokens");
  }
  TokenizerSpec spec;
  bool ignore_merges = false;
  // A file without tokenizer.ggml.pre is one llama.cpp reads with its default pre-tokenizer.
  FS_RETURN_IF_ERROR(pre_tokenizer_for_gguf(meta.pre.empty() ? "default" : meta.pre, &spec.pre, &ignore_merges));
  spec.bpe.ignore_merges = ignore_merges;
  spec.tokens = meta.tokens;
  spec.present.assign(n, 1);
  spec.in_model.assign(n, 0);
  std::unordered_map<std::string, int32_t> ids;
  ids.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    const int32_t type = meta.token_type.empty() ? kTypeNormal : meta.token_type[id];
    if (type == kTypeControl || type == kTypeUserDefined) {
      AddedToken t;
      t.id = static_cast<int32_t>(id);
      t.content = meta.tokens[id];
      t.special = type == kTypeControl;
      spec.added.push_back(std::move(t));
    } else {
      spec.in_model[id] = 1;
      ids.emplace(meta.tokens[id], static_cast<int32_t>(id));  // a duplicate keeps its first id
    }
  }
  spec.merges.reserve(meta.merges.size());
  for (size_t rank = 0; rank < meta.merges.size(); ++rank) {
    const std::string& m = meta.merges[rank];
    const size_t space = m.find(' ', 1);
    if (space == std::string::npos) {
      return invalid_argument("tokenizer.ggml.merges[" + std::to_string(rank) + "] '" + m + "' is not two tokens");
    }
    const auto l = ids.find(m.substr(0, space)), r = ids.find(m.substr(space + 1));
    if (l == ids.end() || r == ids.end()) {
      return invalid_argument("tokenizer.ggml.merges[" + std::to_string(rank) + "] '" + m + "' names a token not in the vocabulary");
    }
    spec.merges.emplace_back(l->second, r->second);
  }
  auto id_or_none = [&](int64_t id, const char* key, int32_t* slot) -> Status {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      return out_of_range(std::string("tokenizer.ggml.") + key + " " + std::to_string(id) + " is outside the vocabulary of " +
                          std::to_string(n));
    }
    *slot = static_cast<int32_t>(id);
    return Status::Ok();
  };
  FS_RETURN_IF_ERROR(id_or_none(meta.bos_token_id, "bos_token_id", &spec.bos));
  FS_RETURN_IF_ERROR(id_or_none(meta.eos_token_id, "eos_token_id", &spec.eos));
  FS_RETURN_IF_ERROR(id_or_none(meta.padding_token_id, "padding_token_id", &spec.pad));
  // llama.cpp adds a bos where the file says so, and by default for Llama 3's tokenizer.
  const bool add_bos = meta.add_bos_token.value_or(meta.pre == "llama-bpe" || meta.pre == "llama3");
  const bool add_eos = meta.add_eos_token.value_or(false);
  if (add_bos) {
    if (spec.bos < 0) return invalid_argument("tokenizer.ggml.add_bos_token is set but there is no bos_token_id");
    spec.prefix_ids.push_back(spec.bos);
  }
  if (add_eos) {
    if (spec.eos < 0) return invalid_argument("tokenizer.ggml.add_eos_token is set but there is no eos_token_id");
    spec.suffix_ids.push_back(spec.eos);
  }
  spec.chat_template = meta.chat_template;
  Tokenizer tok;
  FS_RETURN_IF_ERROR(finish_tokenizer(std::move(spec), tok.impl_.get()));
  *out = std::move(tok);
  return Status::Ok();
}

}  // namespace flashserve::text
