// TextStream (server/text/text_stream.h): generated ids -> text deltas with stop strings, over a
// small byte-level BPE tokenizer built here (256 byte tokens, a few merges, one control token).
// The concatenated deltas must equal decode(ids) cut at the first stop string; a delta never
// ends inside a UTF-8 character; the stop text is never returned, even split across tokens.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "server/text/text_stream.h"
#include "server/text/tokenizer.h"
#include "server/text/utf8.h"
#include "tests/text_support.h"

namespace flashserve::text {
namespace {

using test::small_tokenizer;

std::vector<int32_t> encode(const Tokenizer& t, const std::string& s) {
  std::vector<int32_t> ids;
  EXPECT_TRUE(t.encode(s, false, &ids).ok());
  return ids;
}

// Streams ids one by one (or in chunks of `chunk`); returns the text, whether it stopped, and
// how many ids were used.
std::string stream(const Tokenizer& t, const std::vector<int32_t>& ids, const std::vector<std::string>& stop,
                   size_t chunk, bool* stopped, size_t* used_total, int64_t min_tokens = 0) {
  TextStream ts(t, stop, true, min_tokens);
  std::string out;
  *stopped = false;
  *used_total = 0;
  for (size_t i = 0; i < ids.size() && !*stopped; i += chunk) {
    const size_t n = std::min(chunk, ids.size() - i);
    std::string delta;
    size_t used = 0;
    EXPECT_TRUE(ts.add(std::span<const int32_t>(ids.data() + i, n), &delta, stopped, &used).ok());
    EXPECT_TRUE(utf8_is_valid(delta)) << "a delta ends inside a character";
    out += delta;
    *used_total += used;
  }
  if (!*stopped) {
    std::string tail;
    ts.finish(&tail);
    out += tail;
  }
  return out;
}

TEST(TextStream, StopStringSplitAcrossTokensIsCutAndNotReturned) {
  const Tokenizer t = small_tokenizer();
  const std::string text = "hello wor STOP after";
  const std::vector<int32_t> ids = encode(t, text);
  for (size_t chunk : {1, 2, 5, 100}) {
    bool stopped = false;
    size_t used = 0;
    EXPECT_EQ(stream(t, ids, {"STOP"}, chunk, &stopped, &used), "hello wor ") << chunk;
    EXPECT_TRUE(stopped);
    // The ids used end with the one that completed "STOP".
    std::string upto;
    ASSERT_TRUE(t.decode(std::span<const int32_t>(ids.data(), used), true, &upto).ok());
    EXPECT_EQ(upto.substr(upto.size() - 2), "OP") << upto;
  }
  // A stop string made of parts of two merged tokens ("lo w": "l", "o", "Ġw").
  bool stopped = false;
  size_t used = 0;
  EXPECT_EQ(stream(t, ids, {"lo w", "after"}, 1, &stopped, &used), "hel");
  // The earliest of several wins; one that never completes holds nothing back at the end.
  EXPECT_EQ(stream(t, ids, {"after", "STO"}, 3, &stopped, &used), "hello wor ");
  EXPECT_EQ(stream(t, ids, {"afterX"}, 1, &stopped, &used), text);
  EXPECT_FALSE(stopped);
  EXPECT_EQ(stream(t, ids, {"hello"}, 1, &stopped, &used), "");
  EXPECT_TRUE(stopped);
}

TEST(TextStream, MultiByteCharactersAndSpecialTokens) {
  const Tokenizer t = small_tokenizer();
  const std::string text = "\xf0\x9f\x98\x80 caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87<|end|>";  // emoji, é, CJK, control
  std::vector<int32_t> ids = encode(t, text);
  std::string all;
  ASSERT_TRUE(t.decode(ids, true, &all).ok());
  bool stopped = false;
  size_t used = 0;
  EXPECT_EQ(stream(t, ids, {}, 1, &stopped, &used), all);
  EXPECT_EQ(stream(t, ids, {"\xe6\x96\x87"}, 1, &stopped, &used), "\xf0\x9f\x98\x80 caf\xc3\xa9 \xe4\xb8\xad");
  // An id outside the vocabulary (a model's embeddings padded past the tokenizer's) adds no text.
  TextStream ts(t, {}, true);
  std::string d;
  const int32_t ids2[] = {encode(t, "h")[0], 1 << 20, -3, encode(t, "i")[0]};
  EXPECT_TRUE(ts.add(ids2, &d, &stopped, &used).ok());
  ts.finish(&d);
  EXPECT_EQ(d, "hi");
  EXPECT_EQ(used, 4u);
}

// Random byte ids (any byte sequence, so broken characters too) and random stop strings cut from
// the decoded text: the stream equals decode() cut at the first occurrence, every delta valid.
TEST(TextStream, PropertyEqualsDecodeCutAtFirstStop) {
  const Tokenizer t = small_tokenizer();
  std::mt19937 rng(2311);
  for (int iter = 0; iter < 400; ++iter) {
    std::vector<int32_t> ids(1 + rng() % 60);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % (iter % 2 ? 128 : 263));
    std::string all;
    ASSERT_TRUE(t.decode(ids, true, &all).ok());
    std::vector<std::string> stop;
    if (all.size() > 4 && rng() % 4) {
      const size_t at = rng() % (all.size() - 2), len = 1 + rng() % std::min<size_t>(6, all.size() - at);
      std::string s = all.substr(at, len);
      if (utf8_is_valid(s)) stop.push_back(s);
    }
    std::string want = all;
    if (!stop.empty()) want = all.substr(0, all.find(stop[0]));
    bool stopped = false;
    size_t used = 0;
    const size_t chunk = 1 + rng() % 4;
    EXPECT_EQ(stream(t, ids, stop, chunk, &stopped, &used), want) << "iteration " << iter << " chunk " << chunk;
    EXPECT_EQ(stopped, !stop.empty()) << iter;
  }
}

// min_tokens (vLLM's rule): a stop string counts only if it completes at the min_tokens-th id or
// later; one that completed earlier stays in the text. Expected by brute force over ASCII text
// (each prefix's decode is exact): the first id n >= min_tokens whose text has a stop string
// ending past the text of the ids before it.
TEST(TextStream, StopStringsWaitForMinTokens) {
  const Tokenizer t = small_tokenizer();
  const std::vector<int32_t> ids = encode(t, "say STOP then STOP again STOP");
  std::vector<std::string> prefix(ids.size() + 1);
  for (size_t n = 1; n <= ids.size(); ++n)
    ASSERT_TRUE(t.decode(std::span<const int32_t>(ids.data(), n), true, &prefix[n]).ok());
  auto want = [&](const std::string& stop, int64_t min_tokens, bool* stops) {
    for (size_t n = std::max<int64_t>(1, min_tokens); n <= ids.size(); ++n) {
      const size_t at = prefix[n].find(stop, prefix[n - 1].size() >= stop.size() ? prefix[n - 1].size() - stop.size() + 1 : 0);
      if (at != std::string::npos) {
        *stops = true;
        return prefix[n].substr(0, at);
      }
    }
    *stops = false;
    return prefix[ids.size()];
  };
  int cuts = 0;
  for (const std::string stop : {"STOP", "T", "n S", "STOP again"}) {
    for (int64_t min_tokens = 0; min_tokens <= static_cast<int64_t>(ids.size()) + 1; ++min_tokens) {
      for (size_t chunk : {1, 3}) {
        bool want_stop = false, stopped = false;
        size_t used = 0;
        const std::string expect = want(stop, min_tokens, &want_stop);
        EXPECT_EQ(stream(t, ids, {stop}, chunk, &stopped, &used, min_tokens), expect)
            << "stop '" << stop << "' min_tokens " << min_tokens << " chunk " << chunk;
        EXPECT_EQ(stopped, want_stop) << stop << " " << min_tokens;
        cuts += expect != prefix[ids.size()] && expect.find(stop) != std::string::npos;
      }
    }
  }
  EXPECT_GT(cuts, 0) << "no case kept an early stop string in the text";
  // The plain case: with min_tokens past the first STOP's last id, the text runs to the second.
  bool stopped = false;
  size_t used = 0;
  size_t first = 1;
  while (prefix[first].find("STOP") == std::string::npos) ++first;
  EXPECT_EQ(stream(t, ids, {"STOP"}, 1, &stopped, &used, static_cast<int64_t>(first)), "say ");
  EXPECT_EQ(stream(t, ids, {"STOP"}, 1, &stopped, &used, static_cast<int64_t>(first) + 1), "say STOP then ");
  EXPECT_TRUE(stopped);
}

TEST(TextStream, StopStringLimits) {
  EXPECT_TRUE(validate_stop_strings({"a", "\n\n"}).ok());
  EXPECT_EQ(validate_stop_strings({""}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(validate_stop_strings({std::string(300, 'x')}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(validate_stop_strings(std::vector<std::string>(17, "x")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(validate_stop_strings({"\xff"}).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flashserve::text
