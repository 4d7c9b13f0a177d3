#include "bench/timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace flashserve::bench {

Status time_cpu(const std::function<Status()>& fn, double min_seconds, int min_reps, Timing* out) {
  using clock = std::chrono::steady_clock;
  FS_RETURN_IF_ERROR(fn());  // warm-up: thread pool, page faults, caches
  std::vector<double> times;
  const auto start = clock::now();
  while (static_cast<int>(times.size()) < min_reps ||
         std::chrono::duration<double>(clock::now() - start).count() < min_seconds) {
    const auto t0 = clock::now();
    FS_RETURN_IF_ERROR(fn());
    times.push_back(std::chrono::duration<double>(clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  out->median_s = times[times.size() / 2];
  out->min_s = times.front();
  out->reps = static_cast<int>(times.size());
  return Status::Ok();
}

}  // namespace flashserve::bench
