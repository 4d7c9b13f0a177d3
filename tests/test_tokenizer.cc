// server/text: the byte-level alphabet, UTF-8 validation and lossy decoding, BPE against a
// plain reference implementation, added-token matching, loaders' errors, the streaming
// detokenizer (property test: deltas add up to decode, never a cut character), concurrency.
// Exactness against Hugging Face tokenizers on real vocabularies: tests/tokenizer_hf_check.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/text/bpe.h"
#include "server/text/byte_level.h"
#include "server/text/detokenizer.h"
#include "server/text/pre_tokenizer.h"
#include "server/text/tokenizer.h"
#include "server/text/utf8.h"

namespace flashserve::text {
namespace {

using nlohmann::json;

// ---- byte-level alphabet ---------------------------------------------------------------------

TEST(ByteLevel, GPT2Table) {
  EXPECT_EQ(byte_to_code_point(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(byte_to_code_point('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(byte_to_code_point(0), 0x100u);
  EXPECT_EQ(byte_to_code_point('a'), static_cast<uint32_t>('a'));
  EXPECT_EQ(byte_to_code_point(0x7F), 0x121u);   // DEL follows the 33 bytes 0..32
  EXPECT_EQ(byte_to_code_point(0xAD), 0x143u);   // the last one
  EXPECT_EQ(byte_to_code_point(0xFF), 0xFFu);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(code_point_to_byte(byte_to_code_point(static_cast<uint8_t>(b))), b);
  EXPECT_EQ(code_point_to_byte(' '), -1);  // a raw space is not in the alphabet
  EXPECT_EQ(bytes_to_byte_level(" the\n"), "\xC4\xA0the\xC4\x8A");
  std::string raw;
  ASSERT_TRUE(byte_level_to_bytes("\xC4\xA0the", &raw));
  EXPECT_EQ(raw, " the");
  EXPECT_FALSE(byte_level_to_bytes("a b", &raw));
}

// ---- UTF-8 -----------------------------------------------------------------------------------

TEST(Utf8, Validation) {
  size_t off = 0;
  EXPECT_TRUE(utf8_is_valid("plain ascii, and more than eight bytes"));
  EXPECT_TRUE(utf8_is_valid("\xC3\xA9\xE4\xB8\xAD\xF0\x9F\xA6\x99"));  // é 中 🦙
  EXPECT_TRUE(utf8_is_valid("\xF4\x8F\xBF\xBF"));                      // U+10FFFF
  EXPECT_FALSE(utf8_is_valid("ab\xC0\x80", &off));                      // overlong NUL
  EXPECT_EQ(off, 2u);
  EXPECT_FALSE(utf8_is_valid("\xED\xA0\x80"));      // a surrogate
  EXPECT_FALSE(utf8_is_valid("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(utf8_is_valid("12345678\xE4\xB8", &off));  // cut short
  EXPECT_EQ(off, 8u);
  EXPECT_FALSE(utf8_is_valid("\x80"));
  EXPECT_FALSE(utf8_is_valid("\xFF"));
}

std::string lossy(std::string_view bytes) {
  Utf8LossyDecoder d;
  std::string out;
  d.feed(bytes, &out);
  d.finish(&out);
  return out;
}

TEST(Utf8, LossyMaximalSubparts) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(lossy("a\xF0\x9F\xA6"), "a" + r);          // a cut emoji: one replacement
  EXPECT_EQ(lossy("\xE0\x80"), r + r);                 // E0 needs A0..BF next
  EXPECT_EQ(lossy("\xF0\x9F\x41"), r + "A");           // broken by an ASCII byte, which stays
  EXPECT_EQ(lossy("\x80\x80"), r + r);
  EXPECT_EQ(lossy("\xED\xA0\x80"), r + r + r);         // surrogate: ED then two lone bytes
  EXPECT_EQ(lossy("\xC3\xA9"), "\xC3\xA9");
}

// Any chunking of the bytes gives what one feed gives, and no output ends inside a character.
TEST(Utf8, LossyIncrementalEqualsWhole) {
  std::mt19937 rng(20240601);
  const std::vector<std::string> atoms = {"a", "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\xA6\x99", "\x80", "\xFF",
                                          "\xE0", "\xF0\x9F", "\xED\xA0\x80", " "};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes;
    const int n = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < n; ++i) bytes += atoms[rng() % atoms.size()];
    const std::string whole = lossy(bytes);
    Utf8LossyDecoder d;
    std::string out;
    size_t pos = 0;
    while (pos < bytes.size()) {
      const size_t len = std::min(bytes.size() - pos, static_cast<size_t>(1 + rng() % 4));
      std::string delta;
      d.feed(std::string_view(bytes).substr(pos, len), &delta);
      ASSERT_TRUE(utf8_is_valid(delta)) << "trial " << trial;
      out += delta;
      pos += len;
    }
    d.finish(&out);
    ASSERT_EQ(out, whole) << "trial " << trial << " seed 20240601";
    ASSERT_TRUE(utf8_is_valid(whole));
  }
}

// ---- BPE against a reference -----------------------------------------------------------------

// GPT-2's algorithm written plainly: merge the lowest-ranked adjacent pair, leftmost first.
std::vector<std::string> reference_bpe(const std::string& piece, const std::map<std::pair<std::string, std::string>, int>& ranks) {
  std::vector<std::string> s;
  for (char c : piece) s.emplace_back(1, c);
  while (s.size() > 1) {
    int best = INT_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const auto it = ranks.find({s[i], s[i + 1]});
      if (it != ranks.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == INT_MAX) break;
    s[at] += s[at + 1];
    s.erase(s.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  return s;
}

// Random merges over a 3-letter alphabet, random pieces up to 300 bytes (both the scan, for
// short pieces, and the heap, for long ones), compared with the reference; the cache must not
// change results either.
TEST(Bpe, MatchesReferenceOnRandomMerges) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    std::vector<std::pair<bool, std::string>> tokens;
    std::map<std::string, int32_t> ids;
    auto add = [&](const std::string& t) {
      if (ids.count(t)) return ids[t];
      ids[t] = static_cast<int32_t>(tokens.size());
      tokens.push_back({true, t});
      return ids[t];
    };
    for (char c : std::string("abc")) add(std::string(1, c));
    std::vector<std::pair<int32_t, int32_t>> merges;
    std::map<std::pair<std::string, std::string>, int> ranks;
    for (int m = 0; m < 200; ++m) {
      const std::string a = tokens[rng() % tokens.size()].second, b = tokens[rng() % tokens.size()].second;
      if (a.size() + b.size() > 12 || ranks.count({a, b})) continue;
      ranks[{a, b}] = static_cast<int>(merges.size());
      merges.emplace_back(ids[a], ids[b]);
      add(a + b);
    }
    BpeModel bpe;
    ASSERT_TRUE(bpe.init(tokens, merges, {}).ok());
    for (int trial = 0; trial < 400; ++trial) {
      std::string piece;
      const size_t len = 1 + rng() % (trial % 4 == 0 ? 300 : 40);
      for (size_t i = 0; i < len; ++i) piece += "abc"[rng() % 3];
      std::vector<int32_t> got, cached, again;
      bpe.encode_piece_uncached(piece, &got);
      bpe.encode_piece(piece, &cached);
      bpe.encode_piece(piece, &again);
      std::vector<int32_t> want;
      for (const std::string& t : reference_bpe(piece, ranks)) want.push_back(ids[t]);
      ASSERT_EQ(got, want) << "seed " << seed << " piece " << piece;
      ASSERT_EQ(cached, want) << "seed " << seed << " piece " << piece;
      ASSERT_EQ(again, want) << "seed " << seed << " piece " << piece;
    }
  }
}

TEST(Bpe, BadMergesAreErrors) {
  std::vector<std::pair<bool, std::string>> tokens = {{true, "a"}, {true, "b"}};
  BpeModel bpe;
  const Status st = bpe.init(tokens, {{0, 1}}, {});  // "ab" is not in the vocabulary
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_EQ(bpe.init(tokens, {{0, 7}}, {}).code(), StatusCode::kInvalidArgument);
}

// ---- a small tokenizer.json ------------------------------------------------------------------

// Every byte's symbol, then the merges given as raw byte strings, with a pre-tokenizer.
json tiny_tokenizer(const std::vector<std::pair<std::string, std::string>>& merges, const json& pre_tokenizer) {
  json vocab = json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b) vocab[bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = id++;
  json merge_list = json::array();
  for (const auto& [a, b] : merges) {
    const std::string la = bytes_to_byte_level(a), lb = bytes_to_byte_level(b);
    if (!vocab.contains(la + lb)) vocab[la + lb] = id++;
    merge_list.push_back(json::array({la, lb}));
  }
  json added = json::array();
  auto add_token = [&](const std::string& content, bool special, bool lstrip, bool rstrip, bool single_word) {
    added.push_back({{"id", id++}, {"content", content}, {"special", special}, {"lstrip", lstrip}, {"rstrip", rstrip},
                     {"single_word", single_word}, {"normalized", false}});
  };
  add_token("<|im_start|>", true, false, false, false);
  add_token("<|im_end|>", true, false, false, false);
  add_token("<mask>", true, true, false, false);
  add_token("[SEP]", false, false, true, false);
  add_token("cat", false, false, false, true);
  add_token("<|im", false, false, false, false);  // a prefix of longer tokens: longest wins
  return {{"version", "1.0"},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}, {"ignore_merges", false}}},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre_tokenizer},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", json::array({json{{"SpecialToken", {{"id", "<|im_start|>"}, {"type_id", 0}}}},
                                    json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
            {"special_tokens", {{"<|im_start|>", {{"id", "<|im_start|>"}, {"ids", json::array({id - 6})}}}}}}},
          {"decoder", {{"type", "ByteLevel"}}}};
}

const json kByteLevelPre = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};

Tokenizer load(const json& j, const std::string& config = "") {
  Tokenizer tok;
  const Status st = Tokenizer::from_hf_json(j.dump(), config, &tok);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return tok;
}

std::vector<std::string> pieces_of(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) {
    std::string p;
    EXPECT_TRUE(tok.token_to_piece(id, &p).ok());
    out.push_back(p);
  }
  return out;
}

TEST(Tokenizer, MergesAndPreTokenizer) {
  const Tokenizer tok = load(tiny_tokenizer({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}}, kByteLevelPre));
  std::vector<int32_t> ids;
  ASSERT_TRUE(tok.encode("hello world's", false, &ids).ok());
  // "'s" is a piece of its own (GPT-2's regex) with no merge: two ids.
  EXPECT_EQ(pieces_of(tok, ids), (std::vector<std::string>{"hello", " w", "o", "r", "l", "d", "'", "s"}));
  std::string text;
  ASSERT_TRUE(tok.decode(ids, false, &text).ok());
  EXPECT_EQ(text, "hello world's");
  // The post-processor's bos.
  ASSERT_TRUE(tok.encode("hello", true, &ids).ok());
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], tok.token_to_id("<|im_start|>"));
  EXPECT_EQ(tok.bos_id(), ids[0]);  // no tokenizer_config.json: the template's single id
}

TEST(Tokenizer, TokenizerConfig) {
  // bos/eos as strings or {"content": ...}; a named chat template list picks "default".
  const std::string config = R"({"bos_token": "<|im_start|>", "eos_token": {"content": "<|im_end|>"},
      "pad_token": null, "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})";
  const Tokenizer tok = load(tiny_tokenizer({}, kByteLevelPre), config);
  EXPECT_EQ(tok.bos_id(), tok.token_to_id("<|im_start|>"));
  EXPECT_EQ(tok.eos_id(), tok.token_to_id("<|im_end|>"));
  EXPECT_EQ(tok.eos_token(), "<|im_end|>");
  EXPECT_EQ(tok.pad_id(), -1);
  EXPECT_EQ(tok.chat_template(), "D");
  const Tokenizer plain = load(tiny_tokenizer({}, kByteLevelPre), R"({"chat_template": "{{ x }}"})");
  EXPECT_EQ(plain.chat_template(), "{{ x }}");
  EXPECT_EQ(plain.eos_id(), -1);
}

TEST(Tokenizer, AddedTokensLongestFirstAndFlags) {
  const Tokenizer tok = load(tiny_tokenizer({}, kByteLevelPre));
  const int32_t start = tok.token_to_id("<|im_start|>"), end = tok.token_to_id("<|im_end|>"),
                prefix = tok.token_to_id("<|im"), mask = tok.token_to_id("<mask>"), sep = tok.token_to_id("[SEP]"),
                cat = tok.token_to_id("cat");
  std::vector<int32_t> ids;
  ASSERT_TRUE(tok.encode("<|im_start|><|im_end|><|imx", false, &ids).ok());
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids[0], start);
  EXPECT_EQ(ids[1], end);
  EXPECT_EQ(ids[2], prefix);
  // lstrip: "<mask>" takes the spaces before it; rstrip: "[SEP]" the spaces after it.
  ASSERT_TRUE(tok.encode("a  <mask>b[SEP]   c", false, &ids).ok());
  EXPECT_EQ(pieces_of(tok, ids), (std::vector<std::string>{"a", "<mask>", "b", "[SEP]", "c"}));
  EXPECT_EQ(ids[1], mask);
  EXPECT_EQ(ids[3], sep);
  // single_word: "cat" alone matches, inside "concatenate" or "cats" it does not.
  ASSERT_TRUE(tok.encode("cat concatenate cats cat.", false, &ids).ok());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), cat), 2);
  // skip_special_tokens drops special added tokens, keeps the others.
  std::string text;
  ASSERT_TRUE(tok.encode("<|im_start|>x[SEP]", false, &ids).ok());
  ASSERT_TRUE(tok.decode(ids, true, &text).ok());
  EXPECT_EQ(text, "x[SEP]");
  EXPECT_TRUE(tok.is_special(start));
  EXPECT_FALSE(tok.is_special(sep));
}

TEST(Tokenizer, BadInputIsAStatus) {
  const Tokenizer tok = load(tiny_tokenizer({}, kByteLevelPre));
  std::vector<int32_t> ids;
  Status st = tok.encode("ok \xC3\x28 bad", false, &ids);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("offset 3"), std::string::npos) << st.message();
  EXPECT_EQ(tok.encode("\xED\xA0\x80", false, &ids).code(), StatusCode::kInvalidArgument);  // surrogate
  std::string text;
  const std::vector<int32_t> bad = {1, tok.vocab_size()};
  EXPECT_EQ(tok.decode(bad, false, &text).code(), StatusCode::kOutOfRange);
  const std::vector<int32_t> negative = {-1};
  EXPECT_EQ(tok.decode(negative, false, &text).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(tok.token_to_piece(1 << 30, &text).code(), StatusCode::kOutOfRange);
  StreamingDetokenizer detok(tok, false);
  EXPECT_EQ(detok.add(tok.vocab_size(), &text).code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(tok.encode("", true, &ids).ok());
  EXPECT_EQ(ids.size(), 1u);  // just the bos
}

TEST(Tokenizer, LoaderErrors) {
  Tokenizer tok;
  EXPECT_EQ(Tokenizer::from_hf_json("{not json", "", &tok).code(), StatusCode::kInvalidArgument);
  json j = tiny_tokenizer({}, kByteLevelPre);
  j["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(Tokenizer::from_hf_json(j.dump(), "", &tok).code(), StatusCode::kUnsupported);
  j = tiny_tokenizer({}, kByteLevelPre);
  j["model"]["type"] = "WordPiece";
  EXPECT_EQ(Tokenizer::from_hf_json(j.dump(), "", &tok).code(), StatusCode::kUnsupported);
  j = tiny_tokenizer({}, {{"type", "Metaspace"}});
  EXPECT_EQ(Tokenizer::from_hf_json(j.dump(), "", &tok).code(), StatusCode::kUnsupported);
  j = tiny_tokenizer({}, kByteLevelPre);
  j["model"]["merges"] = json::array({"a"});
  EXPECT_EQ(Tokenizer::from_hf_json(j.dump(), "", &tok).code(), StatusCode::kInvalidArgument);
  j = tiny_tokenizer({}, {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}});
  EXPECT_EQ(Tokenizer::from_hf_json(j.dump(), "", &tok).code(), StatusCode::kInvalidArgument);

  GgufTokenizerMetadata meta;
  meta.model = "gpt2";
  meta.pre = "smollm";
  for (int b = 0; b < 256; ++b) meta.tokens.push_back(bytes_to_byte_level(std::string(1, static_cast<char>(b))));
  meta.tokens.push_back("ab");
  meta.merges = {"a b"};
  ASSERT_TRUE(Tokenizer::load_from_gguf_metadata(meta, &tok).ok());
  auto with = [&](auto edit) {
    GgufTokenizerMetadata m = meta;
    edit(m);
    return Tokenizer::load_from_gguf_metadata(m, &tok).code();
  };
  EXPECT_EQ(with([](auto& m) { m.model = "llama"; }), StatusCode::kUnsupported);
  EXPECT_EQ(with([](auto& m) { m.pre = "no-such-pre"; }), StatusCode::kUnsupported);
  EXPECT_EQ(with([](auto& m) { m.merges = {"a zz"}; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& m) { m.merges = {"ab"}; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& m) { m.token_type = {1, 1}; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& m) { m.bos_token_id = 100000; }), StatusCode::kOutOfRange);
  EXPECT_EQ(with([](auto& m) { m.add_bos_token = true; }), StatusCode::kInvalidArgument);  // no bos id
}

TEST(Tokenizer, GgufMetadata) {
  GgufTokenizerMetadata meta;
  meta.model = "gpt2";
  meta.pre = "smollm";
  meta.tokens = {"<|endoftext|>", "<|im_start|>"};
  meta.token_type = {3, 3};
  for (int b = 0; b < 256; ++b) {
    meta.tokens.push_back(bytes_to_byte_level(std::string(1, static_cast<char>(b))));
    meta.token_type.push_back(1);
  }
  meta.bos_token_id = 1;
  meta.eos_token_id = 0;
  meta.add_bos_token = true;
  meta.chat_template = "{{ messages }}";
  Tokenizer tok;
  ASSERT_TRUE(Tokenizer::load_from_gguf_metadata(meta, &tok).ok());
  EXPECT_EQ(tok.vocab_size(), 258);
  EXPECT_EQ(tok.bos_token(), "<|im_start|>");
  EXPECT_EQ(tok.eos_token(), "<|endoftext|>");
  EXPECT_EQ(tok.chat_template(), "{{ messages }}");
  EXPECT_TRUE(tok.is_special(0));
  std::vector<int32_t> ids;
  // smollm: every digit alone, so "123" is three ids even were "12" a token.
  ASSERT_TRUE(tok.encode("x123<|endoftext|>", true, &ids).ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2 + 'x', 2 + '1', 2 + '2', 2 + '3', 0}));
}

TEST(PreTokenizer, RegexesThroughPcre2) {
  PreTokenizer pre;
  ASSERT_TRUE(pre.add_split(kLlama3Pattern, true, SplitBehavior::kIsolated, false).ok());
  Pieces p;
  ASSERT_TRUE(pre.split("I'VE 12345 x\n\n  y", &p).ok());
  std::vector<std::string> got;
  for (size_t i = 0; i < p.size(); ++i) got.emplace_back(p.piece(i));
  EXPECT_EQ(got, (std::vector<std::string>{"I", "'VE", " ", "123", "45", " x", "\n\n", " ", " y"}));
  // \s as Oniguruma reads it (Unicode White_Space): U+0085 is a space, U+180E is not (PCRE2's
  // own \s says it is).
  const std::string ws = R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
  EXPECT_EQ(translate_onig_pattern(R"(\s+(?!\S)|[^\s\p{L}]|\\s)"),
            "[" + ws + "]+(?![^" + ws + "])|[^" + ws + R"(\p{L}]|\\s)");
  PreTokenizer gpt2;
  ASSERT_TRUE(gpt2.add_byte_level(false, true).ok());
  ASSERT_TRUE(gpt2.split("a \u180e! \u0085b", &p).ok());
  got.clear();
  for (size_t i = 0; i < p.size(); ++i) got.emplace_back(p.piece(i));
  EXPECT_EQ(got, (std::vector<std::string>{"a", " \u180e!", " ", "\u0085", "b"}));
}

// ---- streaming detokenizer -------------------------------------------------------------------

// Vocabulary: every byte, plus merged multi-byte pieces of emoji and CJK; random id sequences
// (whole characters, characters cut across byte ids, stray continuation bytes, specials).
TEST(StreamingDetokenizer, DeltasAddUpToDecode) {
  const Tokenizer tok = load(tiny_tokenizer({{"\xF0", "\x9F"}, {"\xF0\x9F", "\xA6"}, {"\xF0\x9F\xA6", "\x99"},
                                             {"\xE4", "\xB8"}, {"\xE4\xB8", "\xAD"}, {"\xC3", "\xA9"}},
                                            kByteLevelPre));
  std::vector<int32_t> interesting;
  for (const char* s : {"\xF0\x9F\xA6\x99", "\xE4\xB8\xAD", "\xC3\xA9", "a", " "}) {
    std::vector<int32_t> ids;
    ASSERT_TRUE(tok.encode(s, false, &ids).ok());
    interesting.insert(interesting.end(), ids.begin(), ids.end());
  }
  for (uint32_t seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> ids;
    const int n = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) {
      const uint32_t r = rng() % 10;
      if (r < 4) ids.push_back(interesting[rng() % interesting.size()]);
      else if (r < 9) ids.push_back(static_cast<int32_t>(rng() % tok.vocab_size()));
      else ids.push_back(tok.token_to_id("<|im_start|>"));
    }
    for (bool skip : {false, true}) {
      std::string want;
      ASSERT_TRUE(tok.decode(ids, skip, &want).ok());
      StreamingDetokenizer detok(tok, skip);
      std::string got;
      for (int32_t id : ids) {
        std::string delta;
        ASSERT_TRUE(detok.add(id, &delta).ok());
        ASSERT_TRUE(utf8_is_valid(delta)) << "seed " << seed;
        got += delta;
      }
      detok.finish(&got);
      ASSERT_EQ(got, want) << "seed " << seed << " skip " << skip;
    }
  }
  // An emoji fed byte by byte: nothing until its last byte.
  StreamingDetokenizer detok(tok, false);
  const std::string emoji = "\xF0\x9F\xA6\x99";
  for (size_t i = 0; i < emoji.size(); ++i) {
    std::string delta;
    const int32_t id = tok.token_to_id(bytes_to_byte_level(emoji.substr(i, 1)));
    ASSERT_TRUE(detok.add(id, &delta).ok());
    EXPECT_EQ(delta, i + 1 < emoji.size() ? "" : emoji);
  }
}

// ---- concurrency -----------------------------------------------------------------------------

TEST(Tokenizer, ConcurrentEncodesAgree) {
  std::vector<std::pair<std::string, std::string>> merges;
  for (const char* w : {"th", "he", "in", "er", "an"}) merges.push_back({std::string(1, w[0]), std::string(1, w[1])});
  merges.push_back({"t", "he"});
  merges.push_back({" ", "the"});
  const Tokenizer tok = load(tiny_tokenizer(merges, kByteLevelPre));
  std::vector<std::string> texts;
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string s;
    for (int w = 0; w < 30; ++w) s += std::string(" the") + char('a' + rng() % 26) + "inner<|im_end|>"[rng() % 5];
    texts.push_back(s);
  }
  std::vector<std::vector<int32_t>> want(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) ASSERT_TRUE(tok.encode(texts[i], false, &want[i]).ok());
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int32_t> ids;
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t k = (i * 7 + t * 13 + round) % texts.size();
          if (!tok.encode(texts[k], false, &ids).ok() || ids != want[k]) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace flashserve::text
