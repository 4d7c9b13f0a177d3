// Sampling on the GPU: one CTA per row of logits [rows, vocab] (device), the rules of
// sample_row (sampler.h) with thresholds found by bisection over the probabilities instead of a
// sort, and the draw by inverse CDF in vocabulary order. Same distribution as the host
// sampler; not the same token for the same u (the order of the CDF differs).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "server/model/sampler.h"

namespace flashserve::model {

class CudaSampler {
 public:
  CudaSampler() = default;
  ~CudaSampler();
  CudaSampler(const CudaSampler&) = delete;
  CudaSampler& operator=(const CudaSampler&) = delete;

  // tokens gets one id a row. logits: device, [rows.size(), vocab] fp32.
  Status sample(const float* logits, int32_t vocab, const std::vector<SampleRow>& rows, cudaStream_t stream,
                std::vector<int32_t>* tokens);

 private:
  void* params_ = nullptr;  // device: per-row parameters, banned ids, output tokens
  int64_t capacity_ = 0;
};

}  // namespace flashserve::model
