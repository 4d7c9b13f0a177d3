#include "server/model/model.h"

#include <string>

namespace flashserve::model {

Status ForwardBatch::validate(int32_t vocab_size) const {
  const int32_t B = batch();
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (B == 0 || T == 0) return invalid_argument("forward: empty batch");
  if (static_cast<int32_t>(cu_seqlens_q.size()) != B + 1 || cu_seqlens_q[0] != 0 || cu_seqlens_q[B] != T ||
      static_cast<int64_t>(slot_mapping.size()) != T || num_decode < 0 || num_decode > B ||
      block_table_stride < 1 || static_cast<int64_t>(block_tables.size()) != B * block_table_stride)
    return invalid_argument("forward: inconsistent batch");
  for (int32_t s = 0; s < B; ++s) {
    const int32_t q_len = cu_seqlens_q[s + 1] - cu_seqlens_q[s];
    if (q_len < 1 || seq_lens[s] < q_len) return invalid_argument("forward: inconsistent lengths");
    if (s < num_decode && q_len != 1)
      return invalid_argument("forward: a decode sequence with " + std::to_string(q_len) + " tokens");
  }
  for (int32_t tok : tokens)
    if (tok < 0 || tok >= vocab_size) return out_of_range("forward: token id " + std::to_string(tok) + " out of range");
  return Status::Ok();
}

Status Model::forward_and_sample(const ForwardBatch& batch, const std::vector<SampleRow>& rows,
                                 std::vector<int32_t>* tokens, std::vector<TokenLogprobs>* logprobs) {
  if (static_cast<int32_t>(rows.size()) != batch.batch()) return invalid_argument("forward_and_sample: one row a sequence");
  std::vector<float> logits;
  FS_RETURN_IF_ERROR(forward(batch, &logits));
  const int32_t V = config().vocab_size;
  tokens->resize(rows.size());
  for (size_t b = 0; b < rows.size(); ++b) (*tokens)[b] = sample_row(&logits[b * V], V, rows[b]);
  if (logprobs) {
    logprobs->assign(rows.size(), TokenLogprobs{});
    for (size_t b = 0; b < rows.size(); ++b)
      if (rows[b].logprobs >= 0) (*logprobs)[b] = token_logprobs(&logits[b * V], V, (*tokens)[b], rows[b].logprobs);
  }
  return Status::Ok();
}

Status Model::begin_step(const ForwardBatch& batch, const std::vector<SampleRow>& rows) {
  return forward_and_sample(batch, rows, &step_tokens_, &step_logprobs_);
}

Status Model::end_step(std::vector<int32_t>* tokens, std::vector<TokenLogprobs>* logprobs) {
  *tokens = std::move(step_tokens_);
  if (logprobs != nullptr) *logprobs = std::move(step_logprobs_);
  step_tokens_.clear();
  step_logprobs_.clear();
  return Status::Ok();
}

}  // namespace flashserve::model
