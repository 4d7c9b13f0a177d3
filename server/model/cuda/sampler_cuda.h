// Sampling on the GPU: one CTA per row of logits [rows, vocab] (device), the rules of
// sample_row (sampler.h) with thresholds found by bisection instead of a sort, and the draw by
// inverse CDF in vocabulary order. top_k and top_p: with FLASHSERVE_SAMPLER_CANDIDATES=1 (off
// until measured) over the logits within 16 nats (at the row's temperature) of the top, kept in
// shared memory (at most 4096); otherwise, or where they cannot decide, over the whole
// vocabulary's probabilities. Ties at a threshold are all kept (the host keeps
// the lower ids). Same distribution as the host sampler otherwise; not the same token for the
// same u (the order of the CDF differs); the same row and u always give the same token.
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

  // tokens gets one id a row. logits: device, [rows.size(), vocab] fp32. launch then finish.
  Status sample(const float* logits, int32_t vocab, const std::vector<SampleRow>& rows, cudaStream_t stream,
                std::vector<int32_t>* tokens);
  // The draws queued on stream (their parameters uploaded from pinned memory, so nothing here
  // waits for the work before them); finish waits for the oldest launch not finished and gives
  // its tokens. At most two launches are not finished (each has its buffers: the engine's
  // overlapped steps launch step n + 1's draws before they take step n's); a third is refused.
  // finish with none outstanding gives no tokens.
  // With `logprobs`, the rows that ask (SampleRow::logprobs 0..20) get their token_logprobs on
  // the device too (fp32 where the host sums in float64: within ~1e-5), and finish hands them
  // over (one entry a row, token -1 where a row did not ask); a row asking for more than 20
  // leaves the launch without them (prepared_device_logprobs() false: the caller computes them).
  // drawn (device, [rows], may be null): gets the tokens too, on the device (the next step's
  // placeholders read them there: ForwardBatch).
  Status launch(const float* logits, int32_t vocab, const std::vector<SampleRow>& rows, cudaStream_t stream,
                bool logprobs = false, int32_t* drawn = nullptr);
  // launch in three parts, for a caller that uploads the draws' parameters with its own data in
  // one copy (the CUDA model: one pinned upload a step, issue 27): prepare lays them out (bytes,
  // at most prepared_bytes_bound), write_prepared copies them to the caller's pinned buffer, and
  // launch_prepared queues the draws reading them at `uploaded` (their device copy, queued
  // before on stream; null: the sampler uploads them itself, as launch does).
  Status prepare(int32_t vocab, const std::vector<SampleRow>& rows, bool logprobs, int64_t* bytes);
  void write_prepared(char* host) const;
  Status launch_prepared(const float* logits, cudaStream_t stream, int32_t* drawn = nullptr,
                         const char* uploaded = nullptr);
  static int64_t prepared_bytes_bound(int64_t rows, int64_t banned);  // banned: ids in all
  Status finish(std::vector<int32_t>* tokens, std::vector<TokenLogprobs>* logprobs = nullptr);
  // Whether the prepared launch computes its asking rows' logprobs on the device (prepare's
  // logprobs on and every asking row within the device's 20); whether the last finished one did.
  bool prepared_device_logprobs() const { return prepared_.ready && prepared_.logprobs; }
  bool logprobs_ready() const { return logprobs_ready_; }
  // Buffers for `rows` rows and `banned` banned ids in all, made now (for both launches; with no
  // launch outstanding): a launch within them allocates nothing (an allocation would wait for the
  // device's work: the whole step).
  Status reserve(int64_t rows, int64_t banned);
  // Of the last finished launch's rows, those whose top_k / top_p thresholds the candidates
  // decided (FLASHSERVE_SAMPLER_CANDIDATES=1; tests check the path that ran).
  int64_t candidate_rows() const { return candidate_rows_; }

 private:
  // One launch's buffers and what finish needs of it.
  struct Slot {
    // device: the results ([tokens n][flags n][logprobs]), then the parameters where the
    // sampler uploads them itself; host (pinned): the results back, the parameters to upload.
    void* params = nullptr;
    int64_t capacity = 0;
    char* host = nullptr;
    int64_t host_capacity = 0;
    int64_t rows = 0;  // the launch's rows
    std::vector<std::pair<int32_t, int32_t>> asking;  // its asking rows (row, top count)
    bool logprobs_launched = false;
    cudaEvent_t done = nullptr;  // recorded after the results' copy back
  };
  // The next launch, prepared: its parameters in staged_ ([params n][banned + 1][asks 2m]).
  struct Prepared {
    bool ready = false;
    int32_t vocab = 0;
    int64_t rows = 0, bytes = 0, banned_at = 0, asks_at = 0, ban_smem = 0;
    std::vector<std::pair<int32_t, int32_t>> asking;
    bool logprobs = false;
  };
  Prepared prepared_;
  std::vector<char> staged_;
  Status grow(Slot& slot, int64_t bytes);  // its buffers to at least bytes
  Slot slots_[2];
  int64_t launched_ = 0, finished_ = 0;  // launch k uses slots_[k % 2]
  int64_t candidate_rows_ = 0;
  bool logprobs_ready_ = false;
};

}  // namespace flashserve::model
