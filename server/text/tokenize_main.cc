// flashserve_tokenize: the tokenizer from the command line, and the driver of the exactness
// test against Hugging Face tokenizers (tests/tokenizer_hf_check.py) and of its benchmark.
//   flashserve_tokenize --tokenizer-json tokenizer.json --text "Hello world"
//   flashserve_tokenize --gguf-metadata-json meta.json --encode lines.jsonl > ids.jsonl
//   flashserve_tokenize --tokenizer-json tokenizer.json --decode ids.jsonl [--skip-special-tokens]
//   flashserve_tokenize --tokenizer-json tokenizer.json --bench lines.jsonl --repeat 3
// --encode reads one JSON string a line and writes {"ids": [...], "roundtrip": decode == text};
// --decode reads one JSON array of ids a line and writes {"text": ..., "stream_equal": ...}
// (whether the streaming detokenizer's deltas add up to decode's text); a failed line is
// {"error": "CODE: message"}.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "server/text/detokenizer.h"
#include "server/text/tokenizer.h"

using flashserve::Status;
using flashserve::text::GgufTokenizerMetadata;
using flashserve::text::StreamingDetokenizer;
using flashserve::text::Tokenizer;
using nlohmann::json;

namespace {

bool read_file(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

// The plain-data form of a GGUF's tokenizer keys (what tests/tokenizer_hf_check.py writes
// with the gguf package): {"model", "pre", "tokens", "merges", "token_type", "bos_token_id", ...}.
Status load_gguf_metadata_json(const std::string& path, Tokenizer* tok) {
  std::string text;
  if (!read_file(path, &text)) return flashserve::invalid_argument("cannot read " + path);
  GgufTokenizerMetadata meta;
  try {
    const json j = json::parse(text);
    meta.model = j.value("model", std::string());
    meta.pre = j.value("pre", std::string());
    meta.tokens = j.value("tokens", std::vector<std::string>());
    meta.merges = j.value("merges", std::vector<std::string>());
    meta.token_type = j.value("token_type", std::vector<int32_t>());
    meta.bos_token_id = j.value("bos_token_id", int64_t{-1});
    meta.eos_token_id = j.value("eos_token_id", int64_t{-1});
    meta.padding_token_id = j.value("padding_token_id", int64_t{-1});
    meta.unknown_token_id = j.value("unknown_token_id", int64_t{-1});
    if (j.contains("add_bos_token")) meta.add_bos_token = j["add_bos_token"].get<bool>();
    if (j.contains("add_eos_token")) meta.add_eos_token = j["add_eos_token"].get<bool>();
    meta.chat_template = j.value("chat_template", std::string());
  } catch (const json::exception& e) {
    return flashserve::invalid_argument(path + ": " + e.what());
  }
  return Tokenizer::load_from_gguf_metadata(meta, tok);
}

std::vector<std::string> read_json_lines(const std::string& path, bool* ok) {
  std::vector<std::string> lines;
  std::ifstream f(path);
  *ok = static_cast<bool>(f);
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flashserve tokenizer: encode, decode, benchmark"};
  std::string tokenizer_json, gguf_meta, text, encode_path, decode_path, bench_path;
  bool add_special = false, skip_special = false;
  int repeat = 3;
  auto* src = app.add_option("--tokenizer-json", tokenizer_json, "a Hugging Face tokenizer.json");
  app.add_option("--gguf-metadata-json", gguf_meta, "a GGUF's tokenizer.ggml.* keys as JSON")->excludes(src);
  app.add_option("--text", text, "encode this text and print the ids");
  app.add_option("--encode", encode_path, "JSON-lines file of strings to encode");
  app.add_option("--decode", decode_path, "JSON-lines file of id arrays to decode");
  app.add_option("--bench", bench_path, "JSON-lines file of strings to encode, timed");
  app.add_option("--repeat", repeat, "benchmark passes (the best is reported)");
  app.add_flag("--add-special-tokens", add_special, "add what the post-processor adds (bos)");
  app.add_flag("--skip-special-tokens", skip_special, "decode without special tokens");
  CLI11_PARSE(app, argc, argv);

  Tokenizer tok;
  Status st = !tokenizer_json.empty() ? Tokenizer::from_hf_file(tokenizer_json, &tok)
              : !gguf_meta.empty()    ? load_gguf_metadata_json(gguf_meta, &tok)
                                      : flashserve::invalid_argument("give --tokenizer-json or --gguf-metadata-json");
  if (!st.ok()) {
    std::fprintf(stderr, "flashserve_tokenize: %s\n", st.to_string().c_str());
    return 2;
  }
  if (!text.empty()) {
    std::vector<int32_t> ids;
    st = tok.encode(text, add_special, &ids);
    if (!st.ok()) {
      std::fprintf(stderr, "flashserve_tokenize: %s\n", st.to_string().c_str());
      return 1;
    }
    std::cout << json(ids).dump() << "\n";
    return 0;
  }
  bool ok = true;
  if (!encode_path.empty()) {
    const std::vector<std::string> lines = read_json_lines(encode_path, &ok);
    if (!ok) return std::fprintf(stderr, "cannot read %s\n", encode_path.c_str()), 2;
    std::vector<int32_t> ids;
    std::string decoded;
    for (const std::string& line : lines) {
      const std::string s = json::parse(line).get<std::string>();
      json out;
      st = tok.encode(s, add_special, &ids);
      if (st.ok()) st = tok.decode(ids, false, &decoded);
      if (!st.ok()) {
        out["error"] = st.to_string();
      } else {
        out["ids"] = ids;
        // The round trip without what add_special_tokens put around the text.
        std::vector<int32_t> plain;
        st = tok.encode(s, false, &plain);
        std::string back;
        if (st.ok()) st = tok.decode(plain, false, &back);
        out["roundtrip"] = st.ok() && back == s;
      }
      std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    }
  }
  if (!decode_path.empty()) {
    const std::vector<std::string> lines = read_json_lines(decode_path, &ok);
    if (!ok) return std::fprintf(stderr, "cannot read %s\n", decode_path.c_str()), 2;
    std::string decoded;
    for (const std::string& line : lines) {
      const std::vector<int32_t> ids = json::parse(line).get<std::vector<int32_t>>();
      json out;
      st = tok.decode(ids, skip_special, &decoded);
      if (!st.ok()) {
        out["error"] = st.to_string();
      } else {
        StreamingDetokenizer detok(tok, skip_special);
        std::string streamed;
        for (int32_t id : ids) {
          std::string delta;
          if (!detok.add(id, &delta).ok()) break;
          streamed += delta;
        }
        detok.finish(&streamed);
        out["text"] = decoded;
        out["stream_equal"] = streamed == decoded;
      }
      std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    }
  }
  if (!bench_path.empty()) {
    const std::vector<std::string> lines = read_json_lines(bench_path, &ok);
    if (!ok) return std::fprintf(stderr, "cannot read %s\n", bench_path.c_str()), 2;
    std::vector<std::string> texts;
    size_t bytes = 0;
    for (const std::string& line : lines) {
      texts.push_back(json::parse(line).get<std::string>());
      bytes += texts.back().size();
    }
    std::vector<int32_t> ids;
    double best = 1e30, first = 0;  // first: the pass that fills the BPE cache
    size_t tokens = 0;
    for (int r = 0; r < repeat; ++r) {
      tokens = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (const std::string& s : texts) {
        if (!tok.encode(s, false, &ids).ok()) return 1;
        tokens += ids.size();
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r == 0) first = seconds;
      best = std::min(best, seconds);
    }
    std::cout << json{{"lines", texts.size()}, {"bytes", bytes}, {"tokens", tokens}, {"seconds", best},
                      {"tokens_per_s", tokens / best}, {"mb_per_s", bytes / best / 1e6},
                      {"first_pass_tokens_per_s", tokens / first}}
                     .dump()
              << "\n";
  }
  return 0;
}
