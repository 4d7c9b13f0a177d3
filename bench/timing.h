// Wall-clock timing of a CPU call: warm up once, then repeat until min_seconds have passed
// (at least min_reps times); report the median.
#pragma once

#include <functional>

#include "common/status.h"

namespace flashserve::bench {

struct Timing {
  double median_s = 0;
  double min_s = 0;
  int reps = 0;
};

Status time_cpu(const std::function<Status()>& fn, double min_seconds, int min_reps, Timing* out);

}  // namespace flashserve::bench
