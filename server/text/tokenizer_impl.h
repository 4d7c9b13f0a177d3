// The tokenizer's state, shared by its loaders (tokenizer_json.cc, tokenizer_gguf.cc) and its
// encode/decode (tokenizer.cc). Not a public header.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "server/text/added_tokens.h"
#include "server/text/bpe.h"
#include "server/text/pre_tokenizer.h"
#include "server/text/tokenizer.h"

namespace flashserve::text {

// What a loader fills in; finish() derives the rest.
struct TokenizerSpec {
  std::vector<std::string> tokens;   // [vocab_size] vocabulary strings by id ("" for a hole)
  std::vector<char> present;         // [vocab_size] 1 where an id has a token
  std::vector<char> in_model;        // [vocab_size] 1 where the BPE model may produce the id
  std::vector<std::pair<int32_t, int32_t>> merges;  // in rank order
  BpeModel::Options bpe;
  std::vector<AddedToken> added;
  PreTokenizer pre;
  std::vector<int32_t> prefix_ids, suffix_ids;  // what add_special_tokens puts around the ids
  int32_t bos = -1, eos = -1, pad = -1;
  std::string chat_template;
};

struct Tokenizer::Impl {
  std::vector<std::string> tokens;   // [vocab_size]
  std::vector<std::string> pieces;   // [vocab_size] raw bytes
  std::vector<uint8_t> flags;        // [vocab_size] kValid | kSpecial
  std::unordered_map<std::string, int32_t> token_ids;  // vocabulary strings and added tokens
  std::vector<AddedToken> added;
  AddedTokenMatcher plain_matcher;       // added tokens with normalized = false, matched first
  AddedTokenMatcher normalized_matcher;  // then those with normalized = true
  PreTokenizer pre;
  BpeModel bpe;
  std::vector<int32_t> prefix_ids, suffix_ids;
  int32_t bos = -1, eos = -1, pad = -1;
  std::string bos_token, eos_token, chat_template;

  static constexpr uint8_t kValid = 1, kSpecial = 2;
};

// Builds the tokenizer from a spec (checks ids, decodes byte-level strings, builds the BPE
// model and the matchers).
Status finish_tokenizer(TokenizerSpec spec, Tokenizer::Impl* out);

}  // namespace flashserve::text
