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

/* FS_FP8_E4M3 / FS_FP8_E5M2 (OCP e4m3fn: max 448, no inf; e5m2: max 57344): KV pages only, one
 * byte an element with a scale per (layer, kv head) for K and for V (element = scale * fp8(code));
 * q and o are fp32, fp16 or bf16. On CUDA: decode, paged prefill at head_dim 64/128, the storage. */
typedef enum fs_dtype {
  FS_FLOAT32 = 0,
  FS_FLOAT16 = 1,
  FS_BFLOAT16 = 2,
  FS_FP8_E4M3 = 3,
  FS_FP8_E5M2 = 4
} fs_dtype;
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

/* kvcache/page_view.h KVPageView: the key (value) of block b, kv head h, slot t at k_pages
 * (v_pages) + b*block_stride + h*head_stride + t*token_stride elements, head_dim contiguous. The
 * project's layout (fs_kv_storage's): one pool a layer [num_blocks, 2, num_kv_heads, block_size,
 * head_dim], a block's K then its V; K and V pools apart work too. */
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
  /* What the pages hold (fs_kv_storage_pages sets these three). dtype FS_FLOAT32 (0, what a
   * zeroed struct says): the call's dtype, as before. FS_FP8_E4M3 / FS_FP8_E5M2: FP8 codes, with
   * k_scales and v_scales this layer's [num_kv_heads] fp32 scales where the kernel runs (each
   * finite and > 0); NULL for other pages. On the CPU an fp32 call also reads FS_BFLOAT16 /
   * FS_FLOAT16 pages. Any other pair: FS_INVALID_ARGUMENT. */
  int32_t dtype;              /* fs_dtype */
  const float* k_scales;
  const float* v_scales;
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
 * plans for max_seq_len with max_splits splits, or with max_splits 0 as many as one wave of the
 * workers holds, 1..32: decode/planner.h).
 * num_workers > 0: plans for that many workers (SMs × CTAs per SM, see fs_cuda_sm_count, or CPU
 * threads) of the CUDA kernel's: an item of more than 16 query rows (q_len × GQA group) takes a
 * worker per 16 rows (on CPU threads, which take an item whole, such a plan splits less than it
 * could; fs_decode_run with num_splits 0 plans for the CPU itself).
 * num_workers = 0 asks the machine: where the library has CUDA, a CUDA device is usable and
 * head_dim is 64 or 128, the current device's decode kernel (its SMs × the CTAs of the kernel's
 * bf16 instance for head_dim that an SM holds, by the occupancy API; 16 query rows a CTA), asked
 * of the device once and then cached; otherwise (a CPU-only library, no usable device, another
 * head_dim) the CPU's: the thread pool's threads (FLASHSERVE_NUM_THREADS, else the hardware's),
 * each taking an item whole: the plan fs_decode_run with num_splits 0 makes. A device that is
 * usable but fails the query is an error, not the fallback.
 * min_pages_per_split 0 = 256 keys' worth. max_splits: the cap on splits per sequence; 0 = the
 * planner's: 64, or with graph_mode as many as one wave of the workers holds,
 * ceil(workers / (batch × num_kv_heads × workers an item)), clamped to 1..32. */
FS_API int fs_decode_plan_create(int32_t batch, const int32_t* seq_lens_host, int32_t q_len, int32_t num_heads,
                          int32_t num_kv_heads, int32_t head_dim, int32_t block_size, int32_t num_workers,
                          int32_t min_pages_per_split, int32_t max_splits, int32_t graph_mode,
                          int32_t max_seq_len, fs_decode_plan* out);
/* The same for pages of pages_dtype: FS_FLOAT32 (0), FS_FLOAT16 or FS_BFLOAT16 plan as above;
 * FS_FP8_E4M3 / FS_FP8_E5M2 ask the FP8 instance's CTAs an SM where num_workers is 0 (at
 * head_dim 64 it holds 3 where the 16-bit one holds 4). Any other value: FS_INVALID_ARGUMENT. */
FS_API int fs_decode_plan_create_for_pages(int32_t batch, const int32_t* seq_lens_host, int32_t q_len,
                                           int32_t num_heads, int32_t num_kv_heads, int32_t head_dim,
                                           int32_t block_size, int32_t num_workers, int32_t min_pages_per_split,
                                           int32_t max_splits, int32_t graph_mode, int32_t max_seq_len,
                                           int32_t pages_dtype, fs_decode_plan* out);

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
  int64_t total_k;               /* rows of k, v; paged: the sum of seq_lens if known, else 0
                                    (a hint for the CUDA kernel's key tile) */
  fs_pages pages;                /* when paged */
  fs_mask mask;
  void* o;                       /* [total_q, num_heads, head_dim] */
  int64_t o_row_stride, o_head_stride;
  float* lse;                    /* [total_q, num_heads] or NULL */
} fs_prefill_args;

FS_API int fs_prefill_run(const fs_prefill_args* args, void* stream);

/* A CUDA call's lengths and block tables live on the device, and fs_prefill_run / fs_decode_run
 * read none of them on the host there: the kernels never read outside the pools (lengths clamped
 * to the tables, bad block ids skipped), but a prefill's rows follow cu_seqlens_q, and rows past
 * the output are written where it is wrong. A caller that holds host copies checks them with
 * these, the CPU calls' own checks: args as for the run, with cu_seqlens_q, cu_seqlens_k (packed)
 * or pages.block_table and pages.seq_lens (paged; decode: the latter two) pointing at the host
 * copies (the device and the tensors' pointers are not read). FS_INVALID_ARGUMENT or
 * FS_OUT_OF_RANGE with a message, as the CPU call would return. The Python binding checks every
 * CUDA call so. */
FS_API int fs_prefill_check_lengths(const fs_prefill_args* args);
FS_API int fs_decode_check_lengths(const fs_decode_args* args);

/* The key tile (keys a K/V tile) the CUDA warp-specialized kernel (Hopper) takes for args: 176 or
 * 128 at head_dim 128, 128 at 64, 80 at 256, 0 at other head dims; reads the shapes, the mask and
 * the pages' dtype, no tensor (a benchmark's question). FS_UNSUPPORTED in a CPU-only build. */
FS_API int fs_prefill_ws_key_tile(const fs_prefill_args* args, int32_t* key_tile);

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

/* ---- the paged KV cache (kvcache/kv_storage.h, kvcache/kv_cache_manager.h) ----------------
 * fs_kv_storage: every layer's K and V pages on one device, laid out as
 *   [num_layers][num_blocks][K, V][num_kv_heads][block_size][head_dim]
 * (fs_kv_storage_pages fills an fs_pages for one layer, ready for fs_decode_run/fs_prefill_run).
 * fs_block_manager: the block pool with prefix caching, fork and copy-on-write; it hands out
 * slots (block * block_size + offset) and block tables, and never touches the pages itself. */
typedef struct fs_kv_storage fs_kv_storage;
typedef struct fs_block_manager fs_block_manager;

typedef struct fs_kv_shape {
  int32_t num_layers;
  int32_t num_blocks; /* including the null block 0 */
  int32_t num_kv_heads;
  int32_t block_size; /* a power of two, 1..256 */
  int32_t head_dim;
  int32_t dtype; /* fs_dtype; FP8: scales 1.0 until fs_kv_set_scales */
} fs_kv_shape;

/* Allocates and zero-fills (cudaMalloc on FS_DEVICE_CUDA); FS_RESOURCE_EXHAUSTED when short. */
FS_API int fs_kv_storage_create(int32_t device, const fs_kv_shape* shape, fs_kv_storage** out);
FS_API void fs_kv_storage_destroy(fs_kv_storage* s); /* NULL is fine */
/* Layer `layer`'s pages; block_table/seq_lens fields are left for the caller. */
FS_API int fs_kv_storage_pages(const fs_kv_storage* s, int32_t layer, fs_pages* out);
/* Writes n tokens' K and V into layers [first_layer, first_layer + num_layers).
 * k_new, v_new: [num_layers, n, num_kv_heads, head_dim] contiguous in the storage's dtype;
 * slots: [n] int64, -1 = padding (skipped). All on the storage's device. On the CPU an
 * out-of-range slot is FS_OUT_OF_RANGE and nothing is written; on CUDA such a slot is skipped on
 * the device (never a write outside the pool): check host slots first with fs_kv_check_slots. */
FS_API int fs_kv_append(fs_kv_storage* s, int32_t first_layer, int32_t num_layers, const void* k_new,
                        const void* v_new, const int64_t* slots, int64_t n, void* stream);
/* The same with k_new, v_new of fs_dtype src_dtype: the storage's own (as fs_kv_append), or, into
 * an FP8 storage, FS_FLOAT32 / FS_FLOAT16 / FS_BFLOAT16, quantized as code = sat_rne(x / scale)
 * (round to nearest even, saturating to +-max; NaN stays NaN); on the CPU also FS_FLOAT32 into a
 * 16-bit storage. Another pair: FS_INVALID_ARGUMENT, nothing written. */
FS_API int fs_kv_append_from(fs_kv_storage* s, int32_t first_layer, int32_t num_layers, int32_t src_dtype,
                             const void* k_new, const void* v_new, const int64_t* slots, int64_t n, void* stream);
/* FP8 storages: layer `layer`'s K and V scales, [num_kv_heads] fp32 host arrays (one value in
 * every head is a per-tensor scale). Set them before appending: pages keep the codes written
 * under the old ones. Each finite and > 0, the layer in range, the storage FP8; else
 * FS_INVALID_ARGUMENT / FS_OUT_OF_RANGE and nothing changes. */
FS_API int fs_kv_set_scales(fs_kv_storage* s, int32_t layer, const float* k_scales, const float* v_scales);
FS_API int fs_kv_check_slots(const fs_kv_storage* s, const int64_t* slots_host, int64_t n);
/* Copies block src_dst[2i] to src_dst[2i+1] in every layer, K and V (host array of n pairs).
 * Ids are checked first: FS_OUT_OF_RANGE and nothing copied. */
FS_API int fs_kv_copy_blocks(fs_kv_storage* s, const int32_t* src_dst_host, int32_t n, void* stream);

typedef struct fs_block_manager_config {
  int32_t num_blocks; /* including the null block 0 */
  int32_t block_size;
  int32_t enable_prefix_caching;
  int32_t max_blocks_per_seq; /* 0 = num_blocks - 1 */
} fs_block_manager_config;

typedef struct fs_block_manager_stats {
  int64_t prefix_queries, prefix_hits, evictions;
  int32_t num_free_blocks, num_usable_blocks, num_sequences;
} fs_block_manager_stats;

FS_API int fs_block_manager_create(const fs_block_manager_config* config, fs_block_manager** out);
FS_API void fs_block_manager_destroy(fs_block_manager* m); /* NULL is fine */
/* Registers a sequence with its prompt (n >= 1) and attaches the longest cached prefix of full
 * blocks; *num_cached_tokens (may be NULL) gets how many prompt tokens already have K/V. */
FS_API int fs_block_manager_add_sequence(fs_block_manager* m, int64_t seq_id, const int32_t* prompt, int32_t n,
                                         uint64_t extra_key, int32_t* num_cached_tokens);
/* Blocks that allocating n more slots would take now (-1: unknown sequence). */
FS_API int32_t fs_block_manager_blocks_needed(const fs_block_manager* m, int64_t seq_id, int32_t n);
/* Slots for the sequence's next n tokens: new_tokens = n generated ids to append first (a decode
 * step) or NULL (prompt tokens already known). slots_out gets n slots; copies_out (capacity
 * copies_cap >= 1 pairs, src then dst; required) gets copy-on-write work for fs_kv_copy_blocks, its count in
 * *num_copies (at most 1 per call). FS_RESOURCE_EXHAUSTED (out of blocks) changes nothing. */
FS_API int fs_block_manager_allocate_slots(fs_block_manager* m, int64_t seq_id, int32_t n, const int32_t* new_tokens,
                                           int64_t* slots_out, int32_t* copies_out, int32_t copies_cap,
                                           int32_t* num_copies);
FS_API int fs_block_manager_fork(fs_block_manager* m, int64_t parent_id, int64_t child_id);
FS_API int fs_block_manager_free_sequence(fs_block_manager* m, int64_t seq_id);
/* The sequence's block ids into out (capacity cap), their count into *len; FS_OUT_OF_RANGE
 * when cap is too small (*len still says how many). */
FS_API int fs_block_manager_block_table(const fs_block_manager* m, int64_t seq_id, int32_t* out, int32_t cap,
                                        int32_t* len);
FS_API int fs_block_manager_stats_get(const fs_block_manager* m, fs_block_manager_stats* out);

#ifdef __cplusplus
}
#endif

#endif /* FLASHSERVE_C_H_ */
