// read_gguf_tokenizer_metadata: a GGUF file's tokenizer.ggml.* keys (and tokenizer.chat_template)
// through the model's GGUF reader (server/model/gguf.h), for TextModel.
#include <string>

#include "server/model/gguf.h"
#include "server/text/tokenizer.h"

namespace flashserve::text {

Status read_gguf_tokenizer_metadata(const std::string& path, GgufTokenizerMetadata* meta) {
  model::GgufFile f;
  FS_RETURN_IF_ERROR(model::GgufFile::open(path, &f));
  GgufTokenizerMetadata m;
  FS_RETURN_IF_ERROR(f.get_string("tokenizer.ggml.model", &m.model));
  if (f.has("tokenizer.ggml.pre")) FS_RETURN_IF_ERROR(f.get_string("tokenizer.ggml.pre", &m.pre));
  FS_RETURN_IF_ERROR(f.get_string_array("tokenizer.ggml.tokens", &m.tokens));
  if (f.has("tokenizer.ggml.merges")) FS_RETURN_IF_ERROR(f.get_string_array("tokenizer.ggml.merges", &m.merges));
  if (f.has("tokenizer.ggml.token_type"))
    FS_RETURN_IF_ERROR(f.get_i32_array("tokenizer.ggml.token_type", &m.token_type));
  auto id = [&](const char* key, int64_t* out) -> Status {
    return f.has(key) ? f.get_i64(key, out) : Status::Ok();
  };
  FS_RETURN_IF_ERROR(id("tokenizer.ggml.bos_token_id", &m.bos_token_id));
  FS_RETURN_IF_ERROR(id("tokenizer.ggml.eos_token_id", &m.eos_token_id));
  FS_RETURN_IF_ERROR(id("tokenizer.ggml.padding_token_id", &m.padding_token_id));
  FS_RETURN_IF_ERROR(id("tokenizer.ggml.unknown_token_id", &m.unknown_token_id));
  for (auto [key, out] : {std::pair{"tokenizer.ggml.add_bos_token", &m.add_bos_token},
                          std::pair{"tokenizer.ggml.add_eos_token", &m.add_eos_token}}) {
    if (!f.has(key)) continue;
    bool v = false;
    FS_RETURN_IF_ERROR(f.get_bool(key, &v));
    *out = v;
  }
  if (f.has("tokenizer.chat_template")) FS_RETURN_IF_ERROR(f.get_string("tokenizer.chat_template", &m.chat_template));
  *meta = std::move(m);
  return Status::Ok();
}

}  // namespace flashserve::text
