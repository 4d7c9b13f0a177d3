// The batch builder: a StepPlan (server/engine/scheduler.h) becomes the model's ForwardBatch and
// one SampleRow a sequence (vLLM's input batch / model-runner prepare step is the model).
//
// Rows follow the plan: its decodes, then its prompt chunks. A decode of a token still being
// drawn by the step in flight (overlapped steps) gets the placeholder of its row there
// (ForwardBatch: -(flight_row + 1)). Each block table is written once,
// straight into the batch's one [batch, width] buffer, at the width the model runs the step at
// (Model::block_table_width: the CUDA graph's width for a graph-replayed decode step, else the
// widest table), so the model uploads that buffer as it is. The builder keeps its batch between
// steps, so the buffers are allocated once and reused.
#pragma once

#include <vector>

#include "kvcache/kv_cache_manager.h"
#include "server/engine/scheduler.h"
#include "server/model/model.h"

namespace flashserve::engine {

class BatchBuilder {
 public:
  explicit BatchBuilder(const model::Model* model) : model_(model) {}

  // The step's batch and sampling rows (one a scheduled sequence, decodes first); valid until
  // the next build(). Every scheduled sequence must be an engine Request (server/engine/request.h)
  // whose slots the plan allocated in `cache`.
  void build(const StepPlan& plan, const KVCacheManager& cache);
  const model::ForwardBatch& batch() const { return batch_; }
  const std::vector<model::SampleRow>& rows() const { return rows_; }

 private:
  const model::Model* model_;
  model::ForwardBatch batch_;
  std::vector<model::SampleRow> rows_;
};

}  // namespace flashserve::engine
