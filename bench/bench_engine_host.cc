// The engine's host work between decode steps, with the device simulated (issue 27, overlapped
// steps): the real engine (scheduler, cache manager, batch builder, result streams, one reader
// thread a stream as the transports have) over a model whose begin_step does the CUDA model's
// host work for the step (the tables at its graph width, the attention metadata and graph-mode
// decode plan for Llama-3-8B's shapes at the H200's decode launch shape, the metadata written into
// one upload buffer) and whose "device" is a thread that takes each step's time in order, as a
// stream: a decode step device_ms (the bench_model steps: 5.9 ms at 1 sequence, 7.9 at
// 64, 16.3 at 256), plus 25 us a prompt token. B requests of 1024-token prompts decode 128 tokens;
// reported: the full batch's decode steps, their median pace one step at a time and overlapped,
// and the host's share, pace - device_ms. Nothing here runs on a GPU: the host is this machine's.
// Usage: bench_engine_host [B ...]   (default 1 64 256)
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/engine/engine.h"
#include "server/model/attention_step.h"
#include "server/model/config.h"
#include "server/model/graph_shapes.h"

using namespace flashserve;
using Clock = std::chrono::steady_clock;

namespace {

class SimulatedDevice : public model::Model {
 public:
  SimulatedDevice(const model::LlamaConfig& c, int32_t num_blocks, int32_t block_size, double decode_s)
      : config_(c), steps_(c, Device::kCUDA, DType::kBFloat16), decode_s_(decode_s), device_([this] { run(); }) {
    shape_.num_layers = c.num_hidden_layers;
    shape_.num_blocks = num_blocks;
    shape_.num_kv_heads = c.num_key_value_heads;
    shape_.block_size = block_size;
    shape_.head_dim = c.head_dim;
    shape_.dtype = DType::kBFloat16;
  }
  ~SimulatedDevice() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    device_.join();
  }
  const model::LlamaConfig& config() const override { return config_; }
  const KVStorageShape& kv_shape() const override { return shape_; }
  Status forward(const model::ForwardBatch&, std::vector<float>*) override { return unsupported("simulated"); }
  Status copy_blocks(const BlockCopy*, int32_t) override { return Status::Ok(); }
  int64_t block_table_width(int32_t batch, int32_t num_decode, int64_t widest) const override {
    return batch == num_decode ? model::graph_table_width(widest, shape_.num_blocks - 1, shape_.block_size) : widest;
  }
  bool async_steps() const override { return true; }
  Status begin_step(const model::ForwardBatch& b, const std::vector<model::SampleRow>& rows) override {
    // The CUDA model's host work for the step (LlamaCudaModel::forward_device before its launches).
    const bool graph = b.num_decode == b.batch();
    model::DecodePlanning planning;
    planning.shape = {16, 2, 132};  // the H200's decode launch shape at head_dim 128
    planning.block_size = shape_.block_size;
    planning.graph_mode = graph;
    planning.max_seq_len = static_cast<int32_t>(b.block_table_stride * shape_.block_size);
    model::AttentionStep step;
    FS_RETURN_IF_ERROR(
        steps_.build(b, b.block_table_stride, b.num_decode > 0 ? &planning : nullptr, &step, prev_rows_));
    const model::StepMetadataLayout layout = model::step_metadata_layout(step);
    meta_.resize(static_cast<size_t>(layout.bytes));
    model::write_step_metadata(b, step, layout, meta_.data());
    prev_rows_ = static_cast<int32_t>(rows.size());
    const int64_t prompt_tokens = static_cast<int64_t>(b.tokens.size()) - b.num_decode;
    auto job = std::make_shared<Job>();
    job->rows = rows.size();
    job->device_s = decode_s_ + 25e-6 * static_cast<double>(prompt_tokens);
    job->pure_decode = graph;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(job);
      pending_.push_back(job);
    }
    cv_.notify_all();
    return Status::Ok();
  }
  Status end_step(std::vector<int32_t>* tokens, std::vector<model::TokenLogprobs>* logprobs) override {
    std::unique_lock<std::mutex> lock(mu_);
    std::shared_ptr<Job> j = pending_.front();
    pending_.pop_front();
    cv_.wait(lock, [&] { return j->done; });
    tokens->assign(j->rows, 1000);
    if (logprobs != nullptr) logprobs->assign(j->rows, model::TokenLogprobs{});
    if (j->pure_decode) decode_ends_.emplace_back(j->rows, Clock::now());
    return Status::Ok();
  }
  // (batch, when end_step returned) of the pure decode steps.
  std::vector<std::pair<size_t, Clock::time_point>> decode_ends_;

 private:
  struct Job {
    size_t rows = 0;
    double device_s = 0;
    bool pure_decode = false;
    bool done = false;
    Clock::time_point queued = Clock::now();
  };
  void run() {
    Clock::time_point free_at = Clock::now();
    for (;;) {
      std::shared_ptr<Job> j;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        j = queue_.front();
        queue_.pop_front();
      }
      // The step starts when it was queued or the one before it ended, whichever is later (the
      // device's clock: this thread's late wake-ups do not push the steps after it back).
      free_at = std::max(free_at, j->queued) +
                std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(j->device_s));
      // Asleep, then a spin for the last 200 us: the step ends on time, not a timer's slack late.
      std::this_thread::sleep_until(free_at - std::chrono::microseconds(200));
      while (Clock::now() < free_at) {
      }
      std::lock_guard<std::mutex> lock(mu_);
      j->done = true;
      cv_.notify_all();
    }
  }
  model::LlamaConfig config_;
  KVStorageShape shape_;
  model::AttentionStepBuilder steps_;
  double decode_s_;
  std::vector<char> meta_;
  int32_t prev_rows_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_, pending_;
  bool stop_ = false;
  std::thread device_;  // last: started once the rest is made
};

// The median interval (ms) between the ends of consecutive full-batch decode steps.
double run(int B, double decode_s, bool overlap) {
  model::LlamaConfig c;
  if (!model::synthetic_preset("llama3-8b", &c).ok()) std::exit(1);
  const int32_t block = 16, prompt = 1024, out = 128;
  const int32_t num_blocks = B * ((prompt + out) / block + 1) + 16;
  auto dev = std::make_unique<SimulatedDevice>(c, num_blocks, block, decode_s);
  SimulatedDevice* d = dev.get();
  engine::EngineConfig ec;
  ec.num_blocks = num_blocks;
  ec.block_size = block;
  ec.max_num_batched_tokens = 8192;
  ec.max_num_seqs = 256;
  ec.overlap_steps = overlap;
  std::unique_ptr<engine::Engine> e;
  const Status st = engine::Engine::create(ec, std::move(dev), &e);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    std::exit(1);
  }
  std::vector<std::thread> readers;
  for (int i = 0; i < B; ++i) {
    engine::GenerateRequest r;
    r.prompt.assign(prompt, 3 + i % 1000);  // distinct prompts: no prefix reuse
    r.prompt[0] = i;
    r.sampling.temperature = 0.f;
    r.sampling.max_tokens = out;
    r.sampling.ignore_eos = true;
    std::shared_ptr<engine::ResultStream> s;
    if (!e->enqueue(r, &s).ok()) std::exit(1);
    readers.emplace_back([s] {
      engine::StreamEvent ev;
      while (s->next(&ev)) {
      }
    });
  }
  for (auto& t : readers) t.join();
  e->shutdown();
  std::vector<double> gaps;
  for (size_t i = 1; i < d->decode_ends_.size(); ++i)
    if (d->decode_ends_[i].first == static_cast<size_t>(B) && d->decode_ends_[i - 1].first == static_cast<size_t>(B))
      gaps.push_back(std::chrono::duration<double>(d->decode_ends_[i].second - d->decode_ends_[i - 1].second).count());
  if (gaps.empty()) return 0;
  std::sort(gaps.begin(), gaps.end());
  return gaps[gaps.size() / 2] * 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> batches;
  for (int i = 1; i < argc; ++i) batches.push_back(std::atoi(argv[i]));
  if (batches.empty()) batches = {1, 64, 256};
  std::printf("%-6s %10s %14s %14s %14s %14s\n", "batch", "device ms", "one-at-a-time", "overlapped", "host ms (1x1)",
              "host ms (ovl)");
  for (int B : batches) {
    const double device_ms = B <= 1 ? 5.86 : B <= 64 ? 7.92 : 16.3;
    const double one = run(B, device_ms * 1e-3, false), ovl = run(B, device_ms * 1e-3, true);
    std::printf("%-6d %10.2f %14.3f %14.3f %14.3f %14.3f\n", B, device_ms, one, ovl, one - device_ms, ovl - device_ms);
  }
  return 0;
}
