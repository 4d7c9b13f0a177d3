// Test support for the text tests: a small byte-level BPE tokenizer built from plain metadata.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "server/text/tokenizer.h"
#include "server/text/utf8.h"

namespace flashserve::test {

using text::GgufTokenizerMetadata;
using text::Tokenizer;

// GPT-2's byte -> printable code point table, as UTF-8 strings.
inline std::vector<std::string> byte_tokens() {
  std::vector<std::string> out(256);
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool kept = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    const uint32_t cp = kept ? b : 256 + extra++;
    text::append_utf8(cp, &out[b]);
  }
  return out;
}

// A byte-level BPE tokenizer of 263 tokens: the 256 bytes, six merges ("he", "ll", "hell", "ST",
// "OP", "Ġw") and the control token <|end|> (eos); `chat_template` becomes its template.
inline Tokenizer small_tokenizer(const std::string& chat_template = "") {
  GgufTokenizerMetadata m;
  m.model = "gpt2";
  m.pre = "gpt-2";
  m.tokens = byte_tokens();
  // Merges: "he", "hel"... so some tokens hold several bytes; 'Ġ' is the space's token.
  const std::vector<std::pair<std::string, std::string>> merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"S", "T"},
                                                                   {"O", "P"}, {"\xc4\xa0", "w"}};
  for (const auto& [a, b] : merges) {
    m.merges.push_back(a + " " + b);
    m.tokens.push_back(a + b);
  }
  m.tokens.push_back("<|end|>");
  m.token_type.assign(m.tokens.size(), 1);
  m.token_type.back() = 3;  // control: special
  m.eos_token_id = static_cast<int64_t>(m.tokens.size()) - 1;
  m.chat_template = chat_template;
  Tokenizer t;
  const Status st = Tokenizer::load_from_gguf_metadata(m, &t);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return t;
}

}  // namespace flashserve::test
