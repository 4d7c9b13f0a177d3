#include "server/model/model.h"

#include <algorithm>
#include <string>

namespace flashserve::model {

Status ForwardBatch::validate(int32_t vocab_size, int32_t placeholder_rows) const {
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
    if (tok < -placeholder_rows || tok >= vocab_size)
      return out_of_range(tok < 0 ? "forward: placeholder token " + std::to_string(tok) + " names row " +
                                        std::to_string(-tok - 1) + " of a step before of " +
                                        std::to_string(placeholder_rows) + " rows"
                                  : "forward: token id " + std::to_string(tok) + " out of range");
  return Status::Ok();
}

bool ForwardBatch::has_placeholders() const {
  return std::any_of(tokens.begin(), tokens.end(), [](int32_t t) { return t < 0; });
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
  if (step_results_.size() >= 2) return internal_error("begin_step: two steps begun and not ended");
  const std::vector<int32_t> before = std::move(last_tokens_);
  last_tokens_.clear();  // a step that fails leaves no draws for placeholders to name
  const ForwardBatch* b = &batch;
  ForwardBatch resolved;
  if (batch.has_placeholders()) {  // the step before's draws, known here: put them in
    FS_RETURN_IF_ERROR(batch.validate(config().vocab_size, static_cast<int32_t>(before.size())));
    resolved = batch;
    for (int32_t& t : resolved.tokens)
      if (t < 0) t = before[static_cast<size_t>(-t - 1)];
    b = &resolved;
  }
  StepResults r;
  FS_RETURN_IF_ERROR(forward_and_sample(*b, rows, &r.tokens, &r.logprobs));
  last_tokens_ = r.tokens;
  step_results_.push_back(std::move(r));
  return Status::Ok();
}

Status Model::end_step(std::vector<int32_t>* tokens, std::vector<TokenLogprobs>* logprobs) {
  if (step_results_.empty()) return internal_error("end_step: no step begun");
  StepResults& r = step_results_.front();
  *tokens = std::move(r.tokens);
  if (logprobs != nullptr) *logprobs = std::move(r.logprobs);
  step_results_.pop_front();
  return Status::Ok();
}

}  // namespace flashserve::model
