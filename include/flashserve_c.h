/* flashserve C ABI: the kernels, with raw pointers, sizes, strides and a stream.
 *
 * Every function returns an fs_status (0 = FS_OK); on failure fs_last_error() gives a
 * thread-local message. Strides count elements. Tensors live where `device` says; `stream` is
 * a cudaStream_t for FS_DEVICE_CUDA (NULL = the default stream) and must be NULL for the CPU.
 * Layouts and semantics are those of the C++ headers named beside each struct; lse is the
 * natural-log logsumexp. No C++ type crosses this boundary; this header compiles as C. */
#ifndef FLASHSERVE_C_H_
#define FLASHSERVE_C_H_

#include <stdint.h>

#if defined(__GNUC__)
#define FS_API __attribute__((visibility("default")))
#else
#define FS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fs_status {
  FS_OK = 0,
  FS_INVALID_ARGUMENT = 1,
  FS_OUT_OF_RANGE = 2,
  FS_UNSUPPORTED = 3,
  FS_RESOURCE_EXHAUSTED = 4,
  FS_INTERNAL = 5,
  FS_UNAVAILABLE = 6
} fs_status;

typedef enum fs_dtype { FS_FLOAT32 = 0, FS_FLOAT16 = 1, FS_BFLOAT16 = 2 } fs_dtype;
typedef enum fs_device { FS_DEVICE_CPU = 0, FS_DEVICE_CUDA = 1 } fs_device;

/* The message of this thread's last failed call ("" if none). */
FS_API const char* fs_last_error(void);
FS_API const char* fs_version(void);

/* attention/params.h MaskParams. window -1 = unlimited; softcap 0 = off; slopes may be NULL. */
typedef struct fs_mask {
  float softmax_scale;
  int32_t causal;
  int32_t window_left;
  int32_t window_right;
  const float* alibi_slopes; /* [num_heads] fp32 */
  float softcap;
} fs_mask;

/* kvcache/page_view.h KVPageView: K and V pools [num_blocks, num_kv_heads, block_size, head_dim]. */
typedef struct fs_pages {
  const void* k_pages;
  const void* v_pages;
  int64_t block_stride;
  int64_t head_stride;
  int64_t token_stride;
  int32_t num_blocks;
  int32_t block_size;
  const int32_t* block_table; /* [batch, block_table_stride] */
  int64_t block_table_stride;
  const int32_t* seq_lens;    /* [batch] */
} fs_pages;

/* decode/params.h DecodeParams. */
typedef struct fs_decode_args {
  int32_t device;   /* fs_device */
  int32_t dtype;    /* fs_dtype */
  int32_t batch;
  int32_t q_len;    /* 1..8 */
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t head_dim;
  const void* q;    /* [batch, q_len, num_heads, head_dim] */
  int64_t q_row_stride;
  int64_t q_head_stride;
  fs_pages pages;
  fs_mask mask;
  void* o;          /* [batch, q_len, num_heads, head_dim] */
  int64_t o_row_stride;
  int64_t o_head_stride;
  float* lse;       /* [batch, q_len, num_heads] or NULL */
  int32_t num_splits;      /* from fs_decode_plan; 0 = plan inside (CPU only) */
  int32_t pages_per_split;
  void* workspace;         /* fs_decode_plan.workspace_bytes bytes, 16-byte aligned */
  int64_t workspace_bytes;
} fs_decode_args;

/* decode/planner.h DecodePlan. */
typedef struct fs_decode_plan {
  int32_t num_splits;
  int32_t pages_per_split;
  int64_t work_items;
  double wave_fill;
  int64_t workspace_bytes;
} fs_decode_plan;

/* Plans split-K decode. seq_lens_host: [batch] host array (ignored when graph_mode != 0, which
 * plans for max_seq_len with max_splits splits). num_workers: SMs × CTAs per SM (see
 * fs_cuda_sm_count), or CPU threads. min_pages_per_split 0 = 256 keys' worth. */
FS_API int fs_decode_plan_create(int32_t batch, const int32_t* seq_lens_host, int32_t q_len, int32_t num_heads,
                          int32_t num_kv_heads, int32_t head_dim, int32_t block_size, int32_t num_workers,
                          int32_t min_pages_per_split, int32_t max_splits, int32_t graph_mode,
                          int32_t max_seq_len, fs_decode_plan* out);

/* Runs decode. CUDA: asynchronous on stream; may be captured in a CUDA graph. */
FS_API int fs_decode_run(const fs_decode_args* args, void* stream);

/* attention/params.h PrefillParams. paged != 0: keys and values from pages. */
typedef struct fs_prefill_args {
  int32_t device;
  int32_t dtype;
  int32_t batch;
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t head_dim;
  const void* q;                 /* [total_q, num_heads, head_dim] */
  int64_t q_row_stride;
  int64_t q_head_stride;
  const int32_t* cu_seqlens_q;   /* [batch + 1] */
  int64_t total_q;
  int32_t max_seqlen_q;          /* CUDA: the longest query length */
  int32_t paged;
  const void* k;                 /* [total_k, num_kv_heads, head_dim] when !paged */
  const void* v;
  int64_t k_row_stride, k_head_stride, v_row_stride, v_head_stride;
  const int32_t* cu_seqlens_k;   /* [batch + 1] when !paged */
  int64_t total_k;
  fs_pages pages;                /* when paged */
  fs_mask mask;
  void* o;                       /* [total_q, num_heads, head_dim] */
  int64_t o_row_stride, o_head_stride;
  float* lse;                    /* [total_q, num_heads] or NULL */
} fs_prefill_args;

FS_API int fs_prefill_run(const fs_prefill_args* args, void* stream);

/* attention/merge.h MergeParams: merges num_states partial states of each row. */
typedef struct fs_merge_args {
  int32_t device;
  int32_t num_states;
  int64_t num_rows;
  int32_t head_dim;
  int32_t in_dtype;
  const void* o_in;
  int64_t o_in_state_stride, o_in_row_stride;
  const float* lse_in;
  int64_t lse_in_state_stride, lse_in_row_stride;
  int32_t out_dtype;
  void* o_out;
  int64_t o_out_row_stride;
  float* lse_out;
  int64_t lse_out_row_stride;
} fs_merge_args;

FS_API int fs_merge_states(const fs_merge_args* args, void* stream);

/* Multiprocessors of CUDA device `device` (FS_UNSUPPORTED in a CPU-only build). */
FS_API int fs_cuda_sm_count(int32_t device, int32_t* out);

#ifdef __cplusplus
}
#endif

#endif /* FLASHSERVE_C_H_ */
