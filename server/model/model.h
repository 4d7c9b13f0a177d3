// What the engine needs of a model, whatever the device: its config, its KV storage's shape,
// one forward step over a batch, and copy-on-write copies of KV blocks.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "common/status.h"
#include "kvcache/kv_storage.h"
#include "server/model/config.h"
#include "server/model/sampler.h"

namespace flashserve::model {

// One step's work: the new tokens of each sequence, packed. The first num_decode sequences
// have exactly one new token each (decode); the rest are prompt chunks (prefill). Token i of
// sequence b sits at position seq_lens[b] - q_len_b + i. All arrays are host memory.
//
// A step begun by Model::begin_step may name a token not known yet: -(r + 1) stands for the token
// the model draws for row r of the step begun just before it (the engine's overlapped steps,
// issue 27: step n + 1 is prepared and queued while step n runs, its decodes reading step n's
// draws on the device). Only begin_step takes them; forward() does not.
struct ForwardBatch {
  int32_t num_decode = 0;
  std::vector<int32_t> tokens;        // [num_tokens]; >= 0, or a placeholder -(r + 1) (above)
  std::vector<int32_t> cu_seqlens_q;  // [batch + 1]
  std::vector<int32_t> seq_lens;      // [batch] keys after this step
  std::vector<int32_t> block_tables;  // [batch, block_table_stride]
  int64_t block_table_stride = 0;
  std::vector<int64_t> slot_mapping;  // [num_tokens] where each new token's K/V goes
  int32_t batch() const { return static_cast<int32_t>(seq_lens.size()); }
  // Shapes consistent, decode sequences of one token, tokens inside the vocabulary or
  // placeholders of the step before's placeholder_rows rows.
  Status validate(int32_t vocab_size, int32_t placeholder_rows = 0) const;
  bool has_placeholders() const;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const LlamaConfig& config() const = 0;
  virtual const KVStorageShape& kv_shape() const = 0;
  // Runs one step; *logits gets [batch, vocab] (fp32, host): the logits after each
  // sequence's last new token.
  virtual Status forward(const ForwardBatch& batch, std::vector<float>* logits) = 0;
  virtual Status copy_blocks(const BlockCopy* pairs, int32_t n) = 0;
  // The width a step's block tables are laid out at ([batch, width], padded with the null block)
  // given its widest table, so that the model takes them as they are: that width here; a model
  // that replays a CUDA graph for the step asks for the graph's width.
  virtual int64_t block_table_width(int32_t /*batch*/, int32_t /*num_decode*/, int64_t widest_table) const {
    return widest_table;
  }
  // Runs one step and picks each sequence's next token by rows[b] (one row per sequence).
  // The default samples on the host from forward()'s logits; a GPU model samples on the device
  // and copies back only the tokens. With `logprobs` (optional), it gets one entry a row: for a
  // row with logprobs >= 0, token_logprobs (sampler.h) of its raw logits at its sampled token
  // with the top rows[b].logprobs; for the others TokenLogprobs{} (token -1, top empty). A GPU
  // model copies back the logits of the rows that ask, and of no other.
  virtual Status forward_and_sample(const ForwardBatch& batch, const std::vector<SampleRow>& rows,
                                    std::vector<int32_t>* tokens, std::vector<TokenLogprobs>* logprobs = nullptr);
  // forward_and_sample in two halves, so that a caller's host work can run while a GPU model's
  // step does (issue 27): begin_step runs the step, or on a GPU launches it and its draws;
  // end_step waits for the oldest step begun and not ended and gives what forward_and_sample
  // gives, logprobs included. At most two steps are begun and not ended: the engine begins step
  // n + 1 (its decodes' tokens placeholders for step n's draws: ForwardBatch) before it ends step
  // n, so that the device goes from one step to the next without waiting for the host. A step
  // that failed to begin is not ended; steps begun after a failed one are begun anew (its
  // placeholders are refused: the draws they name never came). The default runs
  // forward_and_sample in begin_step, its placeholders replaced by the step before's tokens, and
  // hands its results over in end_step.
  virtual Status begin_step(const ForwardBatch& batch, const std::vector<SampleRow>& rows);
  virtual Status end_step(std::vector<int32_t>* tokens, std::vector<TokenLogprobs>* logprobs);
  // Whether begin_step returns before the step is done (host work between it and end_step runs
  // beside the device's); false for the default, which runs the whole step in begin_step.
  virtual bool async_steps() const { return false; }
  // The device's view of the step the last end_step finished, where a model times it (issue 27:
  // a step's time apart from the host's): idle, from the step before's end on the device to this
  // begin_step (the host's work between steps; 0 for a first step); prepare, begin_step's host
  // work before its kernels and the metadata's upload; run, the kernels, the draws and the tokens'
  // copy back. Seconds; false where not timed.
  struct StepDeviceTime {
    double idle_s = 0, prepare_s = 0, run_s = 0;
  };
  virtual bool last_step_device_time(StepDeviceTime* /*t*/) const { return false; }
  // The caller is about to wait for work (the engine with nothing to run): the next step's idle
  // is not the host's work between steps, and is not timed.
  virtual void break_step_timing() {}

 private:
  // The default begin_step's: the results of the steps begun and not ended, oldest first, and
  // the tokens of the last step begun (its placeholders' source).
  struct StepResults {
    std::vector<int32_t> tokens;
    std::vector<TokenLogprobs> logprobs;
  };
  std::deque<StepResults> step_results_;
  std::vector<int32_t> last_tokens_;
};

}  // namespace flashserve::model
