// Test support for the model, engine and server tests: the synthetic tiny model, and greedy
// decoding by its plain no-cache reference forward.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/model/llama.h"

namespace flashserve::test {

// The tiny preset's model with synthetic weights of `seed`, its cache holding num_blocks blocks
// of kv.dtype (fp32 by default).
inline std::unique_ptr<model::LlamaModel> tiny_model(uint64_t seed, int num_blocks, int block_size,
                                                     const model::KvCacheOptions& kv = {}) {
  model::LlamaConfig c;
  EXPECT_TRUE(model::synthetic_preset("tiny", &c).ok());
  model::LlamaWeights w;
  EXPECT_TRUE(model::synthetic_weights(c, seed, &w).ok());
  auto m = std::make_unique<model::LlamaModel>();
  EXPECT_TRUE(model::LlamaModel::create(c, std::move(w), num_blocks, block_size, m.get(), kv).ok());
  return m;
}

// A model that hands everything to an inner one and whose steps the engine treats as
// asynchronous (as a GPU model's): tests derive from it to watch or time the steps.
class AsyncModel : public model::Model {
 public:
  explicit AsyncModel(std::unique_ptr<model::Model> inner) : inner_(std::move(inner)) {}
  const model::LlamaConfig& config() const override { return inner_->config(); }
  const KVStorageShape& kv_shape() const override { return inner_->kv_shape(); }
  Status forward(const model::ForwardBatch& b, std::vector<float>* logits) override { return inner_->forward(b, logits); }
  Status copy_blocks(const BlockCopy* pairs, int32_t n) override { return inner_->copy_blocks(pairs, n); }
  Status begin_step(const model::ForwardBatch& b, const std::vector<model::SampleRow>& rows) override {
    return inner_->begin_step(b, rows);
  }
  Status end_step(std::vector<int32_t>* tokens, std::vector<model::TokenLogprobs>* logprobs) override {
    return inner_->end_step(tokens, logprobs);
  }
  bool async_steps() const override { return true; }

 private:
  std::unique_ptr<model::Model> inner_;
};

// A model whose steps run on a thread of their own, in the order begun, as a GPU's on its stream:
// begin_step queues the step (a copy of its batch and rows) and returns at once; end_step waits
// for the oldest one's results; copy_blocks is queued in order with the steps. The engine's host
// work then truly runs beside the steps (its overlapped steps: step n + 1 begun while step n
// runs, whose placeholders the inner model's begin_step fills from step n's draws).
class ThreadedModel : public model::Model {
 public:
  explicit ThreadedModel(std::unique_ptr<model::Model> inner)
      : inner_(std::move(inner)), worker_([this] { work(); }) {}
  ~ThreadedModel() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  const model::LlamaConfig& config() const override { return inner_->config(); }
  const KVStorageShape& kv_shape() const override { return inner_->kv_shape(); }
  Status forward(const model::ForwardBatch& b, std::vector<float>* logits) override {
    Status st;
    run_and_wait([&] { st = inner_->forward(b, logits); });
    return st;
  }
  Status copy_blocks(const BlockCopy* pairs, int32_t n) override {
    std::vector<BlockCopy> copies(pairs, pairs + n);
    queue([this, copies] {
      const Status st = inner_->copy_blocks(copies.data(), static_cast<int32_t>(copies.size()));
      if (!st.ok()) ADD_FAILURE() << "copy_blocks: " << st.to_string();
    });
    return Status::Ok();
  }
  Status begin_step(const model::ForwardBatch& b, const std::vector<model::SampleRow>& rows) override {
    auto result = std::make_shared<Result>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pending_.size() >= 2) return internal_error("ThreadedModel: two steps begun and not ended");
      pending_.push_back(result);
    }
    ++steps_;
    queue([this, b, rows, result] {
      Status st = inner_->begin_step(b, rows);
      if (st.ok()) st = inner_->end_step(&result->tokens, &result->logprobs);
      std::lock_guard<std::mutex> lock(mu_);
      result->status = st;
      result->done = true;
      cv_.notify_all();
    });
    return Status::Ok();
  }
  Status end_step(std::vector<int32_t>* tokens, std::vector<model::TokenLogprobs>* logprobs) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (pending_.empty()) return internal_error("ThreadedModel: no step begun");
    std::shared_ptr<Result> r = pending_.front();
    pending_.pop_front();
    cv_.wait(lock, [&] { return r->done; });
    *tokens = std::move(r->tokens);
    if (logprobs != nullptr) *logprobs = std::move(r->logprobs);
    return r->status;
  }
  bool async_steps() const override { return true; }
  int steps() const { return steps_.load(); }

 private:
  struct Result {
    bool done = false;
    Status status;
    std::vector<int32_t> tokens;
    std::vector<model::TokenLogprobs> logprobs;
  };
  void queue(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_all();
  }
  void run_and_wait(const std::function<void()>& job) {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    queue([&] {
      job();
      std::lock_guard<std::mutex> lock(m);
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return done; });
  }
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping, nothing left
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::unique_ptr<model::Model> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::deque<std::shared_ptr<Result>> pending_;
  std::atomic<int> steps_{0};
  bool stop_ = false;
  std::thread worker_;  // last: started once the rest is made
};

// n tokens of greedy decoding by the no-cache reference forward of tiny_model(seed).
inline std::vector<int32_t> reference_greedy(uint64_t seed, const std::vector<int32_t>& prompt, int n) {
  auto m = tiny_model(seed, 2, 16);
  const int32_t V = m->config().vocab_size;
  std::vector<int32_t> seq = prompt, out;
  std::vector<float> logits;
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(m->reference_forward(seq, &logits).ok());
    const float* last = &logits[(seq.size() - 1) * V];
    out.push_back(static_cast<int32_t>(std::max_element(last, last + V) - last));
    seq.push_back(out.back());
  }
  return out;
}

}  // namespace flashserve::test
