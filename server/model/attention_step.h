// One step's attention metadata, built once from the ForwardBatch and used by every layer (vLLM's
// attention metadata builder is the model): the tokens' positions, the prefill rows' cu_seqlens,
// each sequence's last row, the block tables at their final width, and the decode and prefill
// params of a layer given that layer's q, o and page view. The CPU and the CUDA Llama both use it;
// the pointers it is given live where the kernels run (host on the CPU, device on CUDA), so the
// model fills in its own copies of the arrays (on CUDA: one upload, laid out by
// step_metadata_layout). Given a DecodePlanning (the CUDA model), the builder also plans the
// decode rows' splits (plan_decode) once for every layer; without one (the CPU) the step holds no
// plan and the CPU's decode plans itself.
//
// Row order, as ForwardBatch has it: the num_decode decode sequences (one token each) first,
// then the prefill chunks. So the step's q and o ([num_tokens, num_heads, head_dim]) hold the
// decode tokens in rows [0, num_decode) and the prefill tokens after them, and block table row b
// is sequence b: the decode rows' tables, then the prefill rows'.
//
// Plain C++17 (llama_cuda.h, which bench_model.cu includes through nvcc, reaches it).
#pragma once

#include <cstdint>
#include <vector>

#include "attention/params.h"
#include "common/dtype.h"
#include "common/status.h"
#include "decode/params.h"
#include "decode/planner.h"
#include "kvcache/page_view.h"
#include "server/model/config.h"
#include "server/model/model.h"

namespace flashserve::model {

struct AttentionStep {
  AttentionStep() = default;
  AttentionStep(const AttentionStep&) = delete;  // block_tables may point into this object
  AttentionStep& operator=(const AttentionStep&) = delete;
  AttentionStep(AttentionStep&&) = default;  // a moved vector keeps its buffer
  AttentionStep& operator=(AttentionStep&&) = default;

  // What the kernels run on (from the builder).
  Device device = Device::kCPU;
  DType dtype = DType::kFloat32;  // q, o and the pages
  int32_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  MaskParams mask;  // causal, softmax_scale = 1/sqrt(head_dim)

  // The batch's shape.
  int32_t batch = 0;
  int32_t num_decode = 0;      // sequences 0 .. num_decode-1: one token each
  int64_t num_tokens = 0;
  int32_t max_prefill_q = 0;   // the longest prefill chunk (0: none)
  int64_t prefill_keys = 0;    // the prefill rows' seq_lens summed (the prefill's total_k hint)
  std::vector<int32_t> positions;   // [num_tokens]: token i of sequence b at seq_lens[b] - q_len_b + i
  std::vector<int32_t> cu_prefill;  // [num_prefill() + 1]: the prefill rows' cu_seqlens, from 0
  std::vector<int32_t> last_rows;   // [batch]: the row of each sequence's last new token
  // [batch, block_table_stride] host block ids, rows past a sequence's blocks the null block 0:
  // the batch's own tables when they are at this width already (then valid while the batch is),
  // else a widened copy held here.
  const int32_t* block_tables = nullptr;
  int64_t block_table_stride = 0;
  // The decode rows' split plan (plan_decode for the DecodePlanning the builder was given),
  // made when there was one and the step has decode rows; else decode_planned is false.
  bool decode_planned = false;
  DecodePlan decode_plan;

  int32_t num_prefill() const { return batch - num_decode; }
  int64_t num_decode_tokens() const { return num_decode; }  // decode rows come first
  int64_t num_prefill_tokens() const { return num_tokens - num_decode; }

  // The decode rows' params for one layer. q, o: the step's [num_tokens, num_heads, head_dim]
  // (this takes rows [0, num_decode)); pages: the layer's view of the step's tables and
  // seq_lens (rows from 0). The splits are decode_plan's (num_splits, pages_per_split) when the
  // step is planned, and the caller gives the workspace (at least decode_plan.workspace_bytes);
  // else num_splits is 0: the CPU's decode plans itself.
  DecodeParams decode_params(const void* q, void* o, const KVPageView& pages) const;
  // The prefill rows' params for one layer: q, o and pages as above (this moves them past the
  // decode rows); cu_prefill: where the kernel reads this->cu_prefill (host or device).
  PrefillParams prefill_params(const void* q, void* o, const int32_t* cu_prefill, const KVPageView& pages) const;

 private:
  friend class AttentionStepBuilder;
  std::vector<int32_t> widened_tables_;
};

// What the builder plans a step's decode rows for (the rest of plan_decode's input is the
// batch's and the model's): the CUDA model's, per step with decode rows.
struct DecodePlanning {
  DecodeLaunchShape shape;  // the split kernel's (decode_launch_shape)
  int32_t block_size = 0;   // the cache's tokens a block
  bool graph_mode = false;  // a CUDA graph's step: splits fixed for max_seq_len (DecodePlanInput)
  int32_t max_seq_len = 0;  // graph mode: the longest sequence a replay may see
};

class AttentionStepBuilder {
 public:
  AttentionStepBuilder() = default;
  AttentionStepBuilder(const LlamaConfig& config, Device device, DType dtype);
  // Validates the batch (ForwardBatch::validate: placeholders of placeholder_rows rows pass, for
  // a model that puts the step before's draws in on the device) and builds its step with block
  // tables block_table_width wide (>= the batch's stride; wider rows are padded with the null
  // block); with a planning (not null) and decode rows, plans them too (AttentionStep::decode_plan).
  Status build(const ForwardBatch& batch, int64_t block_table_width, const DecodePlanning* planning,
               AttentionStep* step, int32_t placeholder_rows = 0) const;
  // No plan (the CPU: its decode plans itself).
  Status build(const ForwardBatch& batch, int64_t block_table_width, AttentionStep* step) const {
    return build(batch, block_table_width, nullptr, step);
  }

 private:
  int32_t vocab_size_ = 0;
  Device device_ = Device::kCPU;
  DType dtype_ = DType::kFloat32;
  int32_t num_heads_ = 0, num_kv_heads_ = 0, head_dim_ = 0;
};

// Where a step's small metadata arrays sit in one buffer, so that they go to the device in one
// copy: byte offsets from the buffer's start, each kAlign-aligned, in this order, and its size.
// The offsets depend only on the four sizes, so steps of one shape (a CUDA graph's pure decode
// steps of one batch size at the graph's table width) always get the same ones, and the layout
// of the largest sizes bounds every smaller step's.
struct StepMetadataLayout {
  static constexpr int64_t kAlign = 256;
  int64_t tokens = 0;        // int32 [num_tokens]
  int64_t positions = 0;     // int32 [num_tokens]
  int64_t slots = 0;         // int64 [num_tokens]
  int64_t cu_prefill = 0;    // int32 [num_prefill + 1]
  int64_t seq_lens = 0;      // int32 [batch]
  int64_t last_rows = 0;     // int32 [batch]
  int64_t block_tables = 0;  // int32 [batch, block_table_stride]
  int64_t bytes = 0;         // the end of block_tables
  bool operator==(const StepMetadataLayout& o) const {
    return tokens == o.tokens && positions == o.positions && slots == o.slots && cu_prefill == o.cu_prefill &&
           seq_lens == o.seq_lens && last_rows == o.last_rows && block_tables == o.block_tables && bytes == o.bytes;
  }
};
StepMetadataLayout step_metadata_layout(int64_t num_tokens, int32_t batch, int32_t num_prefill,
                                        int64_t block_table_stride);
inline StepMetadataLayout step_metadata_layout(const AttentionStep& s) {
  return step_metadata_layout(s.num_tokens, s.batch, s.num_prefill(), s.block_table_stride);
}
// Writes the step's arrays (the batch's tokens, slots and seq_lens, the step's positions,
// cu_prefill, last rows and tables) into buf (host, layout.bytes long) where layout says.
void write_step_metadata(const ForwardBatch& batch, const AttentionStep& step, const StepMetadataLayout& layout,
                         char* buf);

}  // namespace flashserve::model
