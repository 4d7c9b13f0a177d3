// A fixed pool of worker threads for the CPU kernels. parallel_for hands out indices
// dynamically (an atomic counter), so uneven items (long and short sequences) balance; the
// calling thread works too. A call made from inside a worker, or while another caller holds
// the pool, runs on the calling thread alone: never a deadlock, never oversubscription.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace flashserve {

class ThreadPool {
 public:
  // num_threads counts the caller: 1 means no worker threads.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(i) once for each i in [0, n), on up to num_threads threads; returns when all
  // calls have returned. fn must not throw.
  void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);

  // The process-wide pool: FLASHSERVE_NUM_THREADS threads if set, else the hardware's count.
  static ThreadPool& global();

 private:
  void worker_loop();
  void run_items();

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one parallel_for at a time uses the workers
  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t next_ = 0;       // next index to hand out (under mutex_ via claim)
  int64_t generation_ = 0; // bumped for every job
  int busy_ = 0;           // workers still inside the current job
  bool stop_ = false;
};

}  // namespace flashserve
