#include "server/model/model.h"

namespace flashserve::model {

Status Model::forward_and_sample(const ForwardBatch& batch, const std::vector<SampleRow>& rows,
                                 std::vector<int32_t>* tokens) {
  if (static_cast<int32_t>(rows.size()) != batch.batch()) return invalid_argument("forward_and_sample: one row a sequence");
  std::vector<float> logits;
  FS_RETURN_IF_ERROR(forward(batch, &logits));
  const int32_t V = config().vocab_size;
  tokens->resize(rows.size());
  for (size_t b = 0; b < rows.size(); ++b) (*tokens)[b] = sample_row(&logits[b * V], V, rows[b]);
  return Status::Ok();
}

}  // namespace flashserve::model
