// flashserve_bench: the bundled load generator, with the flags and report of `vllm bench
// serve`. Streams requests over either front (--backend grpc: Generate; openai, openai-chat:
// the OpenAI-compatible HTTP API, client/backend.h) at a Poisson (or gamma) arrival rate with an
// optional concurrency cap and ramp-up, measures TTFT, TPOT, ITL and E2EL per request, and prints
// the vLLM-style result block; --result-json writes vLLM's keys.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <semaphore>
#include <sstream>
#include <thread>

#include "client/arrivals.h"
#include "client/backend.h"
#include "client/serve_stats.h"
#include "client/svg_report.h"

using namespace flashserve::client;
using Clock = std::chrono::steady_clock;

namespace {

using Prompt = BenchPrompt;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, sep);)
    if (!x.empty()) out.push_back(x);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flashserve_bench: load-test a flashserve server (the flags of `vllm bench serve`)"};
  std::string target = "127.0.0.1:50051", dataset = "random", dataset_path, ramp, result_json_path, token, tls_ca;
  std::string backend_name = "grpc", base_url, host = "127.0.0.1", endpoint, model;
  int port = 8000;
  int32_t vocab = 0;
  std::string percentile_metrics = "ttft,tpot,itl", metric_percentiles = "99";
  std::vector<std::string> goodput;
  int num_prompts = 1000, input_len = 1024, output_len = 128, prefix_len = 0, num_warmups = 0;
  int max_concurrency = 0;
  int rep_prefix_len = 256, rep_suffix_len = 256, rep_num_prefixes = 10, rep_output_len = 128;
  double rate = std::numeric_limits<double>::infinity(), burstiness = 1.0, range_ratio = 0.0, duration = 0;
  double ramp_start = 0, ramp_end = 0;
  uint64_t seed = 0;
  bool ignore_eos = false, save_detailed = false, no_progress = false;
  app.add_option("--backend", backend_name,
                 "grpc (flashserve.v1.Generation at --target), openai (POST /v1/completions, the prompt as token "
                 "ids) or openai-chat (POST /v1/chat/completions, the prompt's text as a user message), at --base-url")
      ->check(CLI::IsMember({"grpc", "openai", "openai-chat"}));
  app.add_option("--target", target, "grpc: host:port")->envname("FLASHSERVE_TARGET");
  double connect_timeout_s = 10;
  app.add_option("--connect-timeout", connect_timeout_s,
                 "grpc: seconds to wait for the connection before the run (none: exit 1 with the reason)")
      ->check(CLI::PositiveNumber);
  app.add_option("--base-url", base_url, "openai*: http(s)://host:port[/path] (default: http://--host:--port)");
  app.add_option("--host", host, "openai*: without --base-url");
  app.add_option("--port", port, "openai*: without --base-url")->check(CLI::Range(1, 65535));
  app.add_option("--endpoint", endpoint, "openai*: the path (default /v1/completions or /v1/chat/completions)");
  app.add_option("--model", model, "openai*: the requests' \"model\" (default: the first of GET /v1/models)");
  app.add_option("--vocab-size", vocab,
                 "random ids below this (default: the server's; openai* find it with POST /detokenize)")
      ->check(CLI::PositiveNumber);
  app.add_option("--num-prompts", num_prompts);
  app.add_option("--request-rate", rate, "requests/s (inf: all at once)");
  app.add_option("--burstiness", burstiness, "gamma shape of the arrivals (1: Poisson)");
  app.add_option("--max-concurrency", max_concurrency, "requests in flight at most (0: no cap)");
  app.add_option("--ramp-up-strategy", ramp, "linear or exponential")->check(CLI::IsMember({"linear", "exponential"}));
  app.add_option("--ramp-up-start-rps", ramp_start);
  app.add_option("--ramp-up-end-rps", ramp_end);
  app.add_option("--duration", duration, "stop sending new requests after this many seconds (0: no limit)");
  app.add_option("--num-warmups", num_warmups, "requests before the measured run");
  app.add_option("--seed", seed);
  app.add_option("--dataset-name", dataset)->check(CLI::IsMember({"random", "jsonl", "prefix-repetition"}));
  app.add_option("--dataset-path", dataset_path,
                 "jsonl: a line {\"prompt_token_ids\": [...]} or {\"prompt\": \"text\"} (tokenized by the server's "
                 "Tokenize, so lengths are real token counts), with an optional \"output_len\": N");
  app.add_option("--input-len,--random-input-len", input_len);
  app.add_option("--output-len,--random-output-len", output_len);
  app.add_option("--range-ratio,--random-range-ratio", range_ratio);
  app.add_option("--prefix-len,--random-prefix-len", prefix_len);
  app.add_option("--prefix-repetition-prefix-len", rep_prefix_len);
  app.add_option("--prefix-repetition-suffix-len", rep_suffix_len);
  app.add_option("--prefix-repetition-num-prefixes", rep_num_prefixes);
  app.add_option("--prefix-repetition-output-len", rep_output_len);
  app.add_flag("--ignore-eos", ignore_eos);
  app.add_option("--percentile-metrics", percentile_metrics, "of ttft,tpot,itl,e2el");
  app.add_option("--metric-percentiles", metric_percentiles, "e.g. 50,90,99");
  app.add_option("--goodput", goodput, "SLOs: ttft:MS tpot:MS e2el:MS");
  app.add_option("--result-json,--result-filename", result_json_path);
  app.add_flag("--save-detailed", save_detailed, "per-request records in the result JSON");
  app.add_option("--auth-token", token, "sent as 'Authorization: Bearer <token>' (either backend)")
      ->envname("FLASHSERVE_AUTH_TOKEN");
  app.add_option("--tls-ca", tls_ca,
                 "PEM of the CA (or self-signed cert) to trust: TLS on for grpc; for openai* with an https base URL");
  app.add_flag("--no-progress", no_progress);
  std::string report_path;
  app.add_option("--report", report_path, "FILE.svg or FILE.html: latency CDFs and throughput over time");
  CLI11_PARSE(app, argc, argv);

  std::unique_ptr<Backend> backend;
  std::string error;
  bool made = false;
  if (backend_name == "grpc") {
    made = make_grpc_backend({target, token, tls_ca, connect_timeout_s}, &backend, &error);
  } else {
    OpenAiBackendOptions o;
    o.chat = backend_name == "openai-chat";
    o.base_url = base_url.empty() ? "http://" + host + ":" + std::to_string(port) : base_url;
    o.endpoint = endpoint;
    o.model = model;
    o.token = token;
    o.tls_ca = tls_ca;
    made = make_openai_backend(o, &backend, &error);
  }
  const bool random_ids = dataset != "jsonl";
  if (!made || (random_ids && vocab == 0 && !backend->vocab_size(&vocab, &error))) {
    std::fprintf(stderr, "flashserve_bench: %s\n", error.c_str());
    return 1;
  }
  if (random_ids && vocab < 4) {  // ids are drawn from [3, vocab)
    std::fprintf(stderr, "flashserve_bench: a vocabulary of %d ids is too small for random prompts\n", vocab);
    return 1;
  }

  // The prompts.
  std::mt19937_64 rng(seed);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(std::max(n, 1)));
    for (auto& x : t) x = std::uniform_int_distribution<int32_t>(3, vocab - 1)(rng);
    return t;
  };
  auto around = [&](int len) {
    const int lo = static_cast<int>(len * (1 - range_ratio)), hi = static_cast<int>(len * (1 + range_ratio));
    return std::max(1, std::uniform_int_distribution<int>(std::max(lo, 1), std::max(hi, 1))(rng));
  };
  std::vector<Prompt> prompts;
  const int total = num_prompts + num_warmups;
  if (dataset == "random") {
    const std::vector<int32_t> prefix = prefix_len > 0 ? random_tokens(prefix_len) : std::vector<int32_t>{};
    for (int i = 0; i < total; ++i) {
      Prompt p;
      p.tokens = prefix;
      const auto body = random_tokens(around(input_len));
      p.tokens.insert(p.tokens.end(), body.begin(), body.end());
      p.output_len = around(output_len);
      prompts.push_back(std::move(p));
    }
  } else if (dataset == "prefix-repetition") {
    std::vector<std::vector<int32_t>> prefixes;
    for (int i = 0; i < rep_num_prefixes; ++i) prefixes.push_back(random_tokens(rep_prefix_len));
    for (int i = 0; i < total; ++i) {
      Prompt p;
      p.tokens = prefixes[static_cast<size_t>(i) % prefixes.size()];
      const auto suffix = random_tokens(rep_suffix_len);
      p.tokens.insert(p.tokens.end(), suffix.begin(), suffix.end());
      p.output_len = rep_output_len;
      prompts.push_back(std::move(p));
    }
  } else {
    std::ifstream in(dataset_path);
    if (!in) {
      std::fprintf(stderr, "flashserve_bench: cannot read %s\n", dataset_path.c_str());
      return 1;
    }
    std::vector<Prompt> all;
    for (std::string l; std::getline(in, l);) {
      if (l.empty()) continue;
      const auto j = nlohmann::json::parse(l, nullptr, false);
      const bool ids = !j.is_discarded() && j.is_object() && j.contains("prompt_token_ids");
      const bool text = !j.is_discarded() && j.is_object() && j.contains("prompt") && j["prompt"].is_string();
      if (!ids && !text) {
        std::fprintf(stderr, "flashserve_bench: %s: a line needs prompt_token_ids or prompt (text)\n",
                     dataset_path.c_str());
        return 1;
      }
      Prompt p;
      if (ids) {
        p.tokens = j["prompt_token_ids"].get<std::vector<int32_t>>();
      } else {  // the server's tokenizer: the prompt is sent as the ids it gives (chat: as the text)
        p.text = j["prompt"].get<std::string>();
        if (!backend->tokenize(p.text, &p.tokens, &error)) {
          std::fprintf(stderr, "flashserve_bench: %s\n", error.c_str());
          return 1;
        }
      }
      p.output_len = j.value("output_len", output_len);
      all.push_back(std::move(p));
    }
    if (all.empty()) return 1;
    for (int i = 0; i < total; ++i) prompts.push_back(all[static_cast<size_t>(i) % all.size()]);
  }

  for (auto& p : prompts) {
    if (!backend->prepare(&p, &error)) {
      std::fprintf(stderr, "flashserve_bench: %s\n", error.c_str());
      return 1;
    }
  }
  auto run_one = [&](const Prompt& p, double start_s) {
    RequestRecord r = backend->generate(p, ignore_eos);
    r.start_s = start_s;
    return r;
  };

  // Warm-ups: one at a time, not measured.
  for (int i = 0; i < num_warmups; ++i) run_one(prompts[i], 0);

  ArrivalOptions ao;
  ao.request_rate = rate;
  ao.burstiness = burstiness;
  ao.ramp_up = ramp;
  ao.ramp_start_rps = ramp_start;
  ao.ramp_end_rps = ramp_end;
  ao.seed = seed + 1;
  const std::vector<double> arrivals = arrival_times(num_prompts, ao);
  std::vector<RequestRecord> records(static_cast<size_t>(num_prompts));
  std::counting_semaphore<1 << 20> slots(max_concurrency > 0 ? max_concurrency : (1 << 20));
  std::atomic<int> done{0};
  std::vector<std::thread> workers;
  const bool progress = !no_progress && isatty(2);
  std::printf("flashserve_bench: %d requests at %s req/s (burstiness %.2f), max concurrency %s, %s dataset, to %s\n",
              num_prompts, std::isinf(rate) ? "inf" : std::to_string(rate).c_str(), burstiness,
              max_concurrency > 0 ? std::to_string(max_concurrency).c_str() : "none", dataset.c_str(),
              backend->describe().c_str());
  std::fflush(stdout);
  const auto t0 = Clock::now();
  int sent = 0;
  for (int i = 0; i < num_prompts; ++i) {
    const auto when = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals[i]));
    std::this_thread::sleep_until(when);
    if (duration > 0 && std::chrono::duration<double>(Clock::now() - t0).count() > duration) break;
    slots.acquire();
    ++sent;
    workers.emplace_back([&, i] {
      records[i] = run_one(prompts[num_warmups + i], std::chrono::duration<double>(Clock::now() - t0).count());
      slots.release();
      const int n = ++done;
      if (progress) {
        const int width = 40, filled = width * n / num_prompts;
        std::fprintf(stderr, "\r[%s%s] %d/%d", std::string(filled, '#').c_str(),
                     std::string(width - filled, ' ').c_str(), n, num_prompts);
      }
    });
  }
  for (auto& w : workers) w.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  if (progress) std::fprintf(stderr, "\n");
  records.resize(static_cast<size_t>(sent));

  std::map<std::string, double> slos;
  for (const auto& g : goodput) {
    const auto kv = split(g, ':');
    if (kv.size() == 2) slos[kv[0]] = std::stod(kv[1]);
  }
  std::vector<double> pcts;
  for (const auto& x : split(metric_percentiles, ',')) pcts.push_back(std::stod(x));
  const auto metrics = split(percentile_metrics, ',');
  const Summary s = summarize(records, elapsed, slos);
  std::printf("%s", report(s, metrics, pcts).c_str());
  if (!report_path.empty() && !write_report(report_path, s, records))
    std::fprintf(stderr, "flashserve_bench: cannot write %s\n", report_path.c_str());
  if (!result_json_path.empty()) {
    std::ofstream out(result_json_path);
    out << result_json(s, records, metrics, pcts, save_detailed);
  }
  return s.failed == 0 ? 0 : 3;  // 3: some requests failed (the report says which)
}
