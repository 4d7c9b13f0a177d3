#include "common/thread_pool.h"

#include <cstdlib>
#include <string>

namespace flashserve {

namespace {
thread_local bool t_in_worker = false;
}

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads < 1) num_threads = 1;
  workers_.reserve(static_cast<size_t>(num_threads - 1));
  for (int i = 0; i + 1 < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_items() {
  for (;;) {
    int64_t i;
    const std::function<void(int64_t)>* fn;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (next_ >= n_) return;
      i = next_++;
      fn = fn_;
    }
    (*fn)(i);
  }
}

void ThreadPool::worker_loop() {
  t_in_worker = true;
  int64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++busy_;
    }
    run_items();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --busy_;
    }
    done_cv_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  std::unique_lock<std::mutex> call_lock(call_mutex_, std::defer_lock);
  if (workers_.empty() || n == 1 || t_in_worker || !call_lock.try_lock()) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    next_ = 0;
    ++generation_;
  }
  work_cv_.notify_all();
  const bool was_worker = t_in_worker;
  t_in_worker = true;  // nested calls from fn run serially
  run_items();
  t_in_worker = was_worker;
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return busy_ == 0 && next_ >= n_; });
  fn_ = nullptr;
  n_ = 0;
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool([] {
    if (const char* env = std::getenv("FLASHSERVE_NUM_THREADS")) {
      const int v = std::atoi(env);
      if (v > 0) return v;
    }
    const unsigned hw = std::thread::hardware_concurrency();
    return hw ? static_cast<int>(hw) : 1;
  }());
  return pool;
}

}  // namespace flashserve
