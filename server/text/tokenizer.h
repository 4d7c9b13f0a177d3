// A byte-level BPE tokenizer as GPT-2, Llama 3, SmolLM and Qwen2 use it, exact against Hugging
// Face tokenizers: added (special) tokens are cut out first (leftmost-longest, with lstrip /
// rstrip / single_word), the rest goes through the pre-tokenizer (PCRE2 regexes with Unicode
// classes) and then BPE on its bytes; the post-processor adds bos/eos when asked.
// Loads a tokenizer.json (+ tokenizer_config.json) or a GGUF file's tokenizer.ggml.* metadata.
// Thread-safe: any number of threads may encode and decode through one Tokenizer at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace flashserve::text {

// A GGUF file's tokenizer keys as plain data (what server/model/gguf.h reads); the keys are
// tokenizer.ggml.<name> unless said otherwise.
struct GgufTokenizerMetadata {
  std::string model;                // "gpt2" (byte-level BPE); anything else is UNSUPPORTED
  std::string pre;                  // the pre-tokenizer's name ("smollm", "llama-bpe", ...)
  std::vector<std::string> tokens;  // [vocab_size] byte-level strings
  std::vector<std::string> merges;  // ["Ġ t", ...] in rank order: two tokens, one space between
  std::vector<int32_t> token_type;  // [vocab_size] 1 normal, 2 unknown, 3 control, 4 user
                                    // defined, 5 unused, 6 byte; empty: all normal
  int64_t bos_token_id = -1, eos_token_id = -1, padding_token_id = -1, unknown_token_id = -1;
  std::optional<bool> add_bos_token, add_eos_token;
  std::string chat_template;  // tokenizer.chat_template
};

// One added token (tokenizer.json's added_tokens; a GGUF's control and user-defined tokens).
struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;      // skipped by decode(skip_special_tokens)
  bool lstrip = false;       // takes the whitespace before it
  bool rstrip = false;       // takes the whitespace after it
  bool single_word = false;  // matches only where no word character touches it
  bool normalized = false;   // matched after normalization (no normalizer here: same text)
};

class Tokenizer {
 public:
  Tokenizer();
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // From a tokenizer.json's text, and a tokenizer_config.json's text ("" when there is none:
  // bos/eos tokens and the chat template come from it).
  static Status from_hf_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                             Tokenizer* out);
  // From a tokenizer.json file; the tokenizer_config.json beside it is read when present.
  static Status from_hf_file(const std::string& tokenizer_json_path, Tokenizer* out);
  // From a GGUF file's tokenizer metadata.
  static Status load_from_gguf_metadata(const GgufTokenizerMetadata& meta, Tokenizer* out);

  // Text -> ids. Special tokens written in the text are always recognised (as HF does);
  // add_special_tokens adds what the post-processor adds (bos for Llama 3; nothing for
  // SmolLM2 or Qwen2). Text that is not valid UTF-8 is INVALID_ARGUMENT (with the offset).
  Status encode(std::string_view text, bool add_special_tokens, std::vector<int32_t>* ids) const;
  // Ids -> text. Bytes that do not form UTF-8 (a character cut between ids) become U+FFFD, as
  // HF's ByteLevel decoder does. An id outside the vocabulary is OUT_OF_RANGE.
  Status decode(std::span<const int32_t> ids, bool skip_special_tokens, std::string* text) const;

  // The raw bytes token `id` stands for (may be part of a UTF-8 character). OUT_OF_RANGE for an
  // unknown id.
  Status token_to_piece(int32_t id, std::string* bytes) const;
  // The token's vocabulary string (byte-level form, "Ġthe"), or OUT_OF_RANGE.
  Status id_to_token(int32_t id, std::string* token) const;
  // The id of a vocabulary string or added token ("<|im_end|>"), or -1.
  int32_t token_to_id(std::string_view token) const;

  int32_t vocab_size() const;       // one past the largest id
  int32_t bos_id() const;           // -1: none
  int32_t eos_id() const;           // -1: none
  int32_t pad_id() const;           // -1: none
  bool is_special(int32_t id) const;  // a special added token (control token in a GGUF)
  const std::string& bos_token() const;      // its text, "" when none
  const std::string& eos_token() const;
  const std::string& chat_template() const;  // "" when none
  const std::vector<AddedToken>& added_tokens() const;

  // Internals for the detokenizer: token_to_piece without the check (id must be valid), and
  // whether an id is in the vocabulary.
  std::string_view piece_unchecked(int32_t id) const;
  bool valid_id(int32_t id) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve::text
