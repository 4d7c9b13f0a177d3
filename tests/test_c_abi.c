/* The C ABI from C: the header compiles as C, plan and run decode on the CPU, errors come back
 * as codes with messages; the prefill kernel's key tile for a call's shapes. Prints "N passed, N
 * failed". */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "flashserve_c.h"

static int passed = 0, failed = 0;
#define CHECK(cond, msg)                                  \
  do {                                                    \
    if (cond) {                                           \
      ++passed;                                           \
    } else {                                              \
      ++failed;                                           \
      fprintf(stderr, "FAILED: %s (%s)\n", msg, #cond);   \
    }                                                     \
  } while (0)

int main(void) {
  /* One sequence of 3 keys in blocks 2 and 1 (block size 2), 2 heads on 1 kv head, dim 4.
   * Keys equal to zero-logit vectors make softmax uniform: o = mean of the values. */
  enum { H = 2, D = 4, BS = 2, NB = 3 };
  float k_pages[NB * 1 * BS * D], v_pages[NB * 1 * BS * D];
  for (int i = 0; i < NB * BS * D; ++i) {
    k_pages[i] = 0.0f;         /* q·k = 0 for every key */
    v_pages[i] = (float)(i % 7) - 3.0f;
  }
  const int32_t table[2] = {2, 1}, seq_len = 3;
  float q[H * D] = {1, 2, 3, 4, -1, -2, -3, -4}, o[H * D], lse[H];
  fs_decode_args a;
  memset(&a, 0, sizeof a);
  a.device = FS_DEVICE_CPU;
  a.dtype = FS_FLOAT32;
  a.batch = 1;
  a.q_len = 1;
  a.num_heads = H;
  a.num_kv_heads = 1;
  a.head_dim = D;
  a.q = q;
  a.q_row_stride = H * D;
  a.q_head_stride = D;
  a.pages.k_pages = k_pages;
  a.pages.v_pages = v_pages;
  a.pages.block_stride = BS * D;
  a.pages.head_stride = BS * D;
  a.pages.token_stride = D;
  a.pages.num_blocks = NB;
  a.pages.block_size = BS;
  a.pages.block_table = table;
  a.pages.block_table_stride = 2;
  a.pages.seq_lens = &seq_len;
  a.mask.softmax_scale = 0.5f;
  a.mask.causal = 1;
  a.mask.window_left = a.mask.window_right = -1;
  a.o = o;
  a.o_row_stride = H * D;
  a.o_head_stride = D;
  a.lse = lse;

  fs_decode_plan plan;
  CHECK(fs_decode_plan_create(1, &seq_len, 1, H, 1, D, BS, 2, 0, 64, 0, 0, &plan) == FS_OK, "plan");
  CHECK(fs_decode_run(&a, NULL) == FS_OK, fs_last_error());
  /* keys 0,1,2 live in block 2 slots 0,1 and block 1 slot 0 */
  for (int h = 0; h < H; ++h) {
    for (int d = 0; d < D; ++d) {
      const float mean = (v_pages[(2 * BS + 0) * D + d] + v_pages[(2 * BS + 1) * D + d] + v_pages[(1 * BS) * D + d]) / 3;
      CHECK(fabsf(o[h * D + d] - mean) < 1e-6f, "o is the mean of the values");
    }
    CHECK(fabsf(lse[h] - logf(3.0f)) < 1e-6f, "lse = ln 3");
  }

  int32_t bad_table[2] = {2, 7}; /* 7 >= num_blocks */
  a.pages.block_table = bad_table;
  CHECK(fs_decode_run(&a, NULL) == FS_OUT_OF_RANGE, "block id out of range");
  CHECK(strstr(fs_last_error(), "out of range") != NULL, "message names the problem");
  a.pages.block_table = table;
  a.head_dim = 0;
  CHECK(fs_decode_run(&a, NULL) == FS_INVALID_ARGUMENT, "head_dim 0");
  CHECK(fs_decode_run(NULL, NULL) == FS_INVALID_ARGUMENT, "null args");

  /* The warp-specialized prefill kernel's key tile for a call's shapes (what benchmarks ask
   * instead of restating the rule); no tensor is read, so none is given. */
  {
    fs_prefill_args p;
    memset(&p, 0, sizeof p);
    p.device = FS_DEVICE_CUDA;
    p.dtype = FS_BFLOAT16;
    p.num_heads = p.num_kv_heads = 16;
    p.head_dim = 128;
    p.batch = 1;
    p.total_q = p.total_k = 16384;
    p.max_seqlen_q = 16384;
    p.mask.causal = 1;
    p.mask.softmax_scale = 0.088f;  // (a scale <= 0 is a logit transform: no page boxes)
    p.mask.window_left = p.mask.window_right = -1;
    int32_t tile = -1;
    const int rc = fs_prefill_ws_key_tile(&p, &tile);
#if FS_TEST_WITH_CUDA
    CHECK(rc == FS_OK && tile == 176, "1x16k causal: 176 keys");
    p.batch = 16;
    p.max_seqlen_q = 1024;
    CHECK(fs_prefill_ws_key_tile(&p, &tile) == FS_OK && tile == 128, "16x1k causal: 128 keys");
    p.mask.causal = 0;
    CHECK(fs_prefill_ws_key_tile(&p, &tile) == FS_OK && tile == 128, "16x1k: 128 keys");
    p.batch = 4;
    p.max_seqlen_q = 4096;
    CHECK(fs_prefill_ws_key_tile(&p, &tile) == FS_OK && tile == 128, "4x4k: 128 keys");
    p.batch = 2;
    p.max_seqlen_q = 8192;
    CHECK(fs_prefill_ws_key_tile(&p, &tile) == FS_OK && tile == 176, "2x8k: 176 keys");
    p.paged = 1;
    p.batch = 4;
    p.max_seqlen_q = 4096;
    p.pages.block_size = 16;
    CHECK(fs_prefill_ws_key_tile(&p, &tile) == FS_OK && tile == 176, "4x4k in 16-token pages: 176 keys");
    p.paged = 0;
    p.pages.block_size = 0;
    p.mask.window_left = 256;
    CHECK(fs_prefill_ws_key_tile(&p, &tile) == FS_OK && tile == 128, "a window: 128 keys");
    p.mask.window_left = -1;
    p.paged = 1;
    p.pages.dtype = FS_FP8_E4M3;
    CHECK(fs_prefill_ws_key_tile(&p, &tile) == FS_OK && tile == 128, "FP8 pages: 128 keys");
    p.paged = 0;
    p.pages.dtype = 0;
    p.head_dim = 64;
    CHECK(fs_prefill_ws_key_tile(&p, &tile) == FS_OK && tile == 128, "d 64: 128 keys");
    p.head_dim = 256;
    CHECK(fs_prefill_ws_key_tile(&p, &tile) == FS_OK && tile == 80, "d 256: 80 keys");
    p.head_dim = 96;
    CHECK(fs_prefill_ws_key_tile(&p, &tile) == FS_OK && tile == 0, "d 96: no ws instance");
#else
    CHECK(rc == FS_UNSUPPORTED, "a CPU-only build has no key tile");
#endif
    CHECK(fs_prefill_ws_key_tile(NULL, &tile) == FS_INVALID_ARGUMENT, "null args");
    CHECK(fs_prefill_ws_key_tile(&p, NULL) == FS_INVALID_ARGUMENT, "null out");
  }
  {
    /* The host checks of a CUDA call's lengths (fs_*_check_lengths): the CPU call's own, on host
     * copies; the device field is not read. */
    fs_prefill_args p;
    memset(&p, 0, sizeof p);
    p.device = FS_DEVICE_CUDA;
    p.batch = 2;
    p.total_q = 5;
    p.total_k = 9;
    int32_t cu_q[3] = {0, 3, 5}, cu_k[3] = {0, 4, 9};
    p.cu_seqlens_q = cu_q;
    p.cu_seqlens_k = cu_k;
    CHECK(fs_prefill_check_lengths(&p) == FS_OK, "good cu_seqlens");
    cu_q[1] = 6;
    CHECK(fs_prefill_check_lengths(&p) == FS_INVALID_ARGUMENT && strstr(fs_last_error(), "decreases"),
          "cu_seqlens_q decreasing");
    cu_q[1] = 3;
    cu_q[2] = 7;
    CHECK(fs_prefill_check_lengths(&p) == FS_INVALID_ARGUMENT && strstr(fs_last_error(), "rows"),
          "cu_seqlens_q past total_q (the rows the kernel would write)");
    cu_q[2] = 5;
    cu_k[0] = 1;
    CHECK(fs_prefill_check_lengths(&p) == FS_INVALID_ARGUMENT, "cu_seqlens_k[0] != 0");
    p.cu_seqlens_k = NULL;
    CHECK(fs_prefill_check_lengths(&p) == FS_INVALID_ARGUMENT, "no host copy of cu_seqlens_k");
    /* Paged: 2 sequences of 4 and 2 keys in blocks of 2 (3 blocks), the queries their last 3 / 2. */
    const int32_t ptable[2][2] = {{0, 2}, {1, -1}};
    int32_t plens[2] = {4, 2};
    p.paged = 1;
    p.pages.num_blocks = NB;
    p.pages.block_size = BS;
    p.pages.block_table = &ptable[0][0];
    p.pages.block_table_stride = 2;
    p.pages.seq_lens = plens;
    CHECK(fs_prefill_check_lengths(&p) == FS_OK, "good pages");
    plens[1] = 1;
    CHECK(fs_prefill_check_lengths(&p) == FS_INVALID_ARGUMENT && strstr(fs_last_error(), "queries"),
          "seq_lens shorter than the queries");
    plens[1] = 3;
    CHECK(fs_prefill_check_lengths(&p) == FS_OUT_OF_RANGE, "a block id -1 in use");
    plens[1] = 2;
    plens[0] = 5;
    CHECK(fs_prefill_check_lengths(&p) == FS_OUT_OF_RANGE, "seq_lens past the block table");
    fs_decode_args d = a;
    d.device = FS_DEVICE_CUDA;
    CHECK(fs_decode_check_lengths(&d) == FS_OK, "decode: good lengths");
    const int32_t long_len = 5, bad_table[2] = {2, 3};
    d.pages.seq_lens = &long_len;
    CHECK(fs_decode_check_lengths(&d) == FS_OUT_OF_RANGE, "decode: seq_lens past the block table");
    d.pages.seq_lens = &seq_len;
    d.pages.block_table = bad_table;
    CHECK(fs_decode_check_lengths(&d) == FS_OUT_OF_RANGE, "decode: a block id past the pool");
    d.pages.block_table = NULL;
    CHECK(fs_decode_check_lengths(&d) == FS_INVALID_ARGUMENT, "decode: no host copy of the table");
    d.pages.block_table = table;
    d.pages.block_size = 0;
    CHECK(fs_decode_check_lengths(&d) == FS_INVALID_ARGUMENT, "decode: block_size 0 (no division by it)");
    p.pages.block_size = 0;
    CHECK(fs_prefill_check_lengths(&p) == FS_INVALID_ARGUMENT, "pages of block_size 0");
    p.pages.block_size = BS;
    p.batch = -1;
    CHECK(fs_prefill_check_lengths(&p) == FS_INVALID_ARGUMENT, "batch < 0");
    CHECK(fs_prefill_check_lengths(NULL) == FS_INVALID_ARGUMENT, "null prefill args");
    CHECK(fs_decode_check_lengths(NULL) == FS_INVALID_ARGUMENT, "null decode args");
  }

  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
