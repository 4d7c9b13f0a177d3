// What the transports need to speak text: the model's tokenizer and chat template, loaded
// beside the model, and the checks on client text. Transports (gRPC, HTTP) turn text into ids
// with it and back (TextStream); the engine never sees text.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/text/chat_template.h"
#include "server/text/tokenizer.h"

namespace flashserve::text {

// The roles a chat message may have.
bool known_chat_role(const std::string& role);

class TextModel {
 public:
  // The tokenizer of a model: a GGUF file's tokenizer.ggml.* keys, or a folder's tokenizer.json
  // (+ tokenizer_config.json); tokenizer_path ("" for the model's own) names a tokenizer.json or
  // a .gguf instead. A model without one (a synthetic preset) gives an empty TextModel, not an
  // error; a tokenizer that is there but broken, or a chat template that does not parse, is an
  // error.
  static Status load(const std::string& model_path, const std::string& tokenizer_path, TextModel* out);
  static Status from_tokenizer(Tokenizer tokenizer, std::string description, std::string chat_source,
                               TextModel* out);

  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  bool has_chat_template() const { return chat_ != nullptr; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const std::string& description() const { return description_; }  // "" without a tokenizer
  const std::string& chat_template_source() const { return chat_source_; }

  // Text -> prompt ids (special tokens written in the text recognised; bos where the tokenizer
  // adds it when add_special_tokens). FAILED_PRECONDITION-like kUnsupported without a tokenizer,
  // INVALID_ARGUMENT for text that is not UTF-8 or is empty.
  Status encode_text(const std::string& text, bool add_special_tokens, std::vector<int32_t>* ids) const;
  // Messages -> the template's prompt text -> ids (as transformers' apply_chat_template with
  // tokenize=True: no special tokens added beyond the template's). INVALID_ARGUMENT for no
  // messages, an unknown role, content that is not UTF-8; the template's own
  // raise_exception is INVALID_ARGUMENT with its message.
  Status encode_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt, std::string* prompt,
                     std::vector<int32_t>* ids) const;

 private:
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> chat_;
  std::string description_, chat_source_;
};

}  // namespace flashserve::text
