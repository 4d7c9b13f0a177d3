// Pre-tokenizers: how text is cut into pieces before BPE, as Hugging Face tokenizers defines
// them (Split with a regex or a string and a delimiter behavior, ByteLevel with its GPT-2
// regex, Digits), in a Sequence. Every step cuts each piece of the step before; a piece never
// spans two. Regexes run through PCRE2 with Unicode classes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "server/text/regex.h"

namespace flashserve::text {

// The regexes real tokenizers use.
// GPT-2's (the ByteLevel pre-tokenizer's use_regex), also SmolLM's and StarCoder's second step.
extern const char kGpt2Pattern[];
// Llama 3's ("llama-bpe"): case-insensitive contractions, numbers in groups of up to 3.
extern const char kLlama3Pattern[];
// Qwen2's: Llama 3's with single digits.
extern const char kQwen2Pattern[];

// SplitDelimiterBehavior: what happens to a match of the pattern.
enum class SplitBehavior {
  kRemoved,             // dropped
  kIsolated,            // a piece of its own
  kMergedWithPrevious,  // glued to the end of the piece before it
  kMergedWithNext,      // glued to the start of the piece after it
  kContiguous,          // consecutive matches form one piece
};
Status parse_split_behavior(std::string_view name, SplitBehavior* out);

// Pieces of one text: byte ranges into `text()` (the input itself, or an internal copy once a
// step has prepended spaces). Reused across calls to avoid allocation.
class Pieces {
 public:
  std::string_view text() const { return owned_ ? std::string_view(buffer_) : input_; }
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }
  std::string_view piece(size_t i) const {
    return text().substr(ranges_[i].first, ranges_[i].second - ranges_[i].first);
  }
  size_t size() const { return ranges_.size(); }

 private:
  friend class PreTokenizer;
  std::string_view input_;
  std::string buffer_, next_buffer_;
  bool owned_ = false;
  std::vector<std::pair<uint32_t, uint32_t>> ranges_, next_;
  std::vector<std::pair<std::pair<uint32_t, uint32_t>, bool>> segments_;
};

class PreTokenizer {
 public:
  // Split(pattern, behavior, invert): `pattern` is a regex (is_regex) or a literal string.
  Status add_split(std::string_view pattern, bool is_regex, SplitBehavior behavior, bool invert);
  // ByteLevel(add_prefix_space, use_regex): a space before each piece that lacks one, then the
  // GPT-2 regex (Isolated). The byte-to-character mapping itself is the BPE model's business.
  Status add_byte_level(bool add_prefix_space, bool use_regex);
  // Digits(individual_digits): each numeric character (\p{N}) a piece, or runs of them.
  Status add_digits(bool individual_digits);

  bool empty() const { return steps_.empty(); }

  // Cuts `text` (valid UTF-8) into pieces; empty pieces are dropped.
  Status split(std::string_view text, Pieces* out) const;

 private:
  struct Step {
    std::shared_ptr<const Regex> regex;  // null: no split (ByteLevel without its regex)
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;
  };
  Status apply_split(const Step& step, Pieces* p) const;
  static void apply_prefix_space(Pieces* p);
  std::vector<Step> steps_;
};

// The pre-tokenizer a GGUF file names in tokenizer.ggml.pre, as llama.cpp reads it:
// "gpt-2" (GPT-2's regex), "llama-bpe"/"llama3" (Llama 3's), "qwen2", "smollm"/"starcoder"/
// "refact"/"codeshell" (each digit alone, then GPT-2's), "default" (llama.cpp's default list).
// *ignore_merges is true where that tokenizer takes a word found whole in the vocabulary
// without merging (Llama 3). An unknown name is UNSUPPORTED.
Status pre_tokenizer_for_gguf(std::string_view pre, PreTokenizer* out, bool* ignore_merges);

}  // namespace flashserve::text
