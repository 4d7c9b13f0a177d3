// read_gguf_tokenizer_metadata: a GGUF file's tokenizer.ggml.* keys through the model's GGUF
// reader (server/model/gguf.h), for TextModel.
#include <string>

#include "server/text/tokenizer.h"

namespace flashserve::text {

Status read_gguf_tokenizer_metadata(const std::string& path, GgufTokenizerMetadata* meta) {
  (void)meta;
  return unsupported("tokenizer from " + path + ": this build's GGUF reader is not wired to the tokenizer yet");
}

}  // namespace flashserve::text
