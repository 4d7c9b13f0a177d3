#include "server/engine/batch_builder.h"

#include <algorithm>

#include "server/engine/request.h"

namespace flashserve::engine {

namespace {

// What the sampler needs of a request now: its parameters (logprobs among them), its draw
// counter (the tokens drawn before this one: delivered, and in flight with overlapped steps, so
// that a seeded request draws the same either way), and the tokens it may not draw yet (eos
// unless ignored, and its stop ids, before min_tokens).
void fill_row(const Request& r, const std::vector<int32_t>& eos, model::SampleRow* row) {
  const SamplingParams& sp = r.req.sampling;
  const int32_t drawn = r.num_generated + r.tokens_in_flight;
  row->temperature = sp.temperature;
  row->top_k = sp.top_k;
  row->top_p = sp.top_p;
  row->min_p = sp.min_p;
  row->seed = r.seed;
  row->step = static_cast<uint64_t>(drawn);
  row->logprobs = sp.logprobs;
  row->banned.clear();
  if (drawn < sp.min_tokens) {
    if (!sp.ignore_eos) row->banned = eos;
    row->banned.insert(row->banned.end(), r.stop_ids.begin(), r.stop_ids.end());
  }
}

}  // namespace

void BatchBuilder::build(const StepPlan& plan, const KVCacheManager& cache) {
  model::ForwardBatch& b = batch_;
  const int32_t num_decode = static_cast<int32_t>(plan.decodes.size());
  const int32_t B = num_decode + static_cast<int32_t>(plan.prefills.size());
  int64_t widest = 1;
  plan.for_each_scheduled([&](const ScheduledSequence& s) {
    widest = std::max<int64_t>(widest, static_cast<int64_t>(cache.block_table(s.seq->seq_id)->size()));
  });
  const int64_t width = model_->block_table_width(B, num_decode, widest);

  b.num_decode = num_decode;
  b.block_table_stride = width;
  b.tokens.clear();
  b.cu_seqlens_q.assign(1, 0);
  b.seq_lens.clear();
  b.block_tables.assign(static_cast<size_t>(B * width), 0);  // null-block padding
  rows_.resize(static_cast<size_t>(B));
  int32_t i = 0;
  plan.for_each_scheduled([&](const ScheduledSequence& s) {
    const Request& r = request_of(s.seq);
    const int32_t len = cache.num_slotted_tokens(r.seq_id);
    const int32_t known = std::min(len, static_cast<int32_t>(r.tokens.size()));
    b.tokens.insert(b.tokens.end(), r.tokens.begin() + (len - s.num_tokens), r.tokens.begin() + known);
    if (known < len) b.tokens.push_back(-(r.flight_row + 1));  // a decode of the token in flight
    b.cu_seqlens_q.push_back(static_cast<int32_t>(b.tokens.size()));
    b.seq_lens.push_back(len);
    const std::vector<int32_t>& table = *cache.block_table(r.seq_id);
    std::copy(table.begin(), table.end(), b.block_tables.begin() + i * width);
    fill_row(r, model_->config().eos_token_ids, &rows_[static_cast<size_t>(i)]);
    ++i;
  });
  b.slot_mapping = plan.slot_mapping;
}

}  // namespace flashserve::engine
