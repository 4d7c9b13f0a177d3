/* The C ABI's paged KV cache from C: a block manager hands out slots and block tables, a CPU
 * storage takes the K/V through fs_kv_append, fs_decode_run reads them back through the pages
 * and the table and must match a float64 reference computed from the appended data; prefix
 * reuse, fork + copy-on-write through fs_kv_copy_blocks, running out of blocks, and bad input.
 * Prints "N passed, N failed". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashserve_c.h"

static int passed = 0, failed = 0;
#define CHECK(cond, msg)                                                        \
  do {                                                                          \
    if (cond) {                                                                 \
      ++passed;                                                                 \
    } else {                                                                    \
      ++failed;                                                                 \
      fprintf(stderr, "FAILED: %s (%s) [%s]\n", msg, #cond, fs_last_error()); \
    }                                                                           \
  } while (0)

enum { L = 2, HK = 2, H = 6, D = 24, BS = 4, NB = 12, PROMPT = 11, MAXB = NB - 1 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float uniform(void) { /* [-1, 1), never all zero */
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng >> 40) * (1.0 / 16777216.0) * 2.0 - 1.0);
}

/* Decode of one query row per sequence (layer `layer`) against the storage, checked against a
 * float64 softmax over keys/values given in token order: kv[t][h][d]. */
static double decode_error(fs_kv_storage* s, int layer, const int32_t* table, int32_t n_blocks, int32_t seq_len,
                           const float* keys, const float* vals) {
  float q[H * D], o[H * D], lse[H];
  for (int i = 0; i < H * D; ++i) q[i] = uniform();
  for (int i = 0; i < H * D; ++i) o[i] = NAN; /* poisoned */
  fs_decode_args a;
  memset(&a, 0, sizeof a);
  a.device = FS_DEVICE_CPU;
  a.dtype = FS_FLOAT32;
  a.batch = 1;
  a.q_len = 1;
  a.num_heads = H;
  a.num_kv_heads = HK;
  a.head_dim = D;
  a.q = q;
  a.q_row_stride = H * D;
  a.q_head_stride = D;
  if (fs_kv_storage_pages(s, layer, &a.pages) != FS_OK) return 1e30;
  a.pages.block_table = table;
  a.pages.block_table_stride = n_blocks;
  a.pages.seq_lens = &seq_len;
  a.mask.softmax_scale = 0.37f;
  a.mask.causal = 1;
  a.mask.window_left = a.mask.window_right = -1;
  a.o = o;
  a.o_row_stride = H * D;
  a.o_head_stride = D;
  a.lse = lse;
  if (fs_decode_run(&a, NULL) != FS_OK) return 1e30;
  double worst = 0;
  for (int h = 0; h < H; ++h) {
    const int g = h / (H / HK);
    double m = -1e300, sum = 0, acc[D] = {0};
    double* logit = malloc(sizeof(double) * seq_len);
    for (int t = 0; t < seq_len; ++t) {
      double dot = 0;
      for (int d = 0; d < D; ++d) dot += (double)q[h * D + d] * keys[(t * HK + g) * D + d];
      logit[t] = dot * 0.37;
      if (logit[t] > m) m = logit[t];
    }
    for (int t = 0; t < seq_len; ++t) {
      const double p = exp(logit[t] - m);
      sum += p;
      for (int d = 0; d < D; ++d) acc[d] += p * vals[(t * HK + g) * D + d];
    }
    free(logit);
    for (int d = 0; d < D; ++d) {
      const double err = fabs(o[h * D + d] - acc[d] / sum);
      if (!(err <= worst)) worst = isnan(o[h * D + d]) ? 1e30 : err;
    }
    const double lerr = fabs(lse[h] - (m + log(sum)));
    if (!(lerr <= worst)) worst = isnan(lse[h]) ? 1e30 : lerr;
  }
  return worst;
}

int main(void) {
  fs_block_manager_config mc = {NB, BS, 1, 0};
  fs_block_manager* m = NULL;
  CHECK(fs_block_manager_create(&mc, &m) == FS_OK && m != NULL, "manager");
  fs_kv_shape shape = {L, NB, HK, BS, D, FS_FLOAT32};
  fs_kv_storage* s = NULL;
  CHECK(fs_kv_storage_create(FS_DEVICE_CPU, &shape, &s) == FS_OK && s != NULL, "storage");

  /* Sequence 7: an 11-token prompt, all slotted, K/V appended for both layers. */
  int32_t prompt[PROMPT + 1];
  for (int i = 0; i < PROMPT; ++i) prompt[i] = 100 + 3 * i;
  int32_t cached = -1, copies[2], ncopies = -1;
  CHECK(fs_block_manager_add_sequence(m, 7, prompt, PROMPT, 0, &cached) == FS_OK && cached == 0, "add 7");
  CHECK(fs_block_manager_blocks_needed(m, 7, PROMPT) == 3, "11 tokens need 3 blocks of 4");
  int64_t slots[PROMPT + 1];
  CHECK(fs_block_manager_allocate_slots(m, 7, PROMPT, NULL, slots, copies, 1, &ncopies) == FS_OK && ncopies == 0,
        "slots for the prompt");
  static float knew[L][PROMPT + 1][HK][D], vnew[L][PROMPT + 1][HK][D];
  for (int l = 0; l < L; ++l)
    for (int t = 0; t < PROMPT; ++t)
      for (int g = 0; g < HK; ++g)
        for (int d = 0; d < D; ++d) knew[l][t][g][d] = uniform(), vnew[l][t][g][d] = uniform();
  /* append takes [num_layers, n, HK, D] contiguous: copy out the first PROMPT tokens per layer */
  static float kbuf[L * PROMPT * HK * D], vbuf[L * PROMPT * HK * D];
  for (int l = 0; l < L; ++l) {
    memcpy(kbuf + l * PROMPT * HK * D, knew[l], sizeof(float) * PROMPT * HK * D);
    memcpy(vbuf + l * PROMPT * HK * D, vnew[l], sizeof(float) * PROMPT * HK * D);
  }
  CHECK(fs_kv_check_slots(s, slots, PROMPT) == FS_OK, "slots in range");
  CHECK(fs_kv_append(s, 0, L, kbuf, vbuf, slots, PROMPT, NULL) == FS_OK, "append the prompt");

  int32_t table[MAXB], len = -1;
  CHECK(fs_block_manager_block_table(m, 7, table, MAXB, &len) == FS_OK && len == 3, "table of 7");
  for (int l = 0; l < L; ++l)
    CHECK(decode_error(s, l, table, len, PROMPT, &knew[l][0][0][0], &vnew[l][0][0][0]) < 1e-5,
          "decode through manager + storage matches float64");

  /* Prefix reuse: the same prompt finds its two full blocks. */
  CHECK(fs_block_manager_add_sequence(m, 8, prompt, PROMPT, 0, &cached) == FS_OK && cached == 8, "prefix hit of 8");
  int32_t table8[MAXB];
  CHECK(fs_block_manager_block_table(m, 8, table8, MAXB, &len) == FS_OK && len == 2 && table8[0] == table[0] &&
            table8[1] == table[1],
        "shares the cached blocks");
  fs_block_manager_stats st;
  CHECK(fs_block_manager_stats_get(m, &st) == FS_OK && st.prefix_hits == 8 && st.num_sequences == 2, "stats");
  CHECK(fs_block_manager_free_sequence(m, 8) == FS_OK, "free 8");

  /* Fork 7 into 9, then a decode step of 9 writes into the shared partial block: copy-on-write. */
  CHECK(fs_block_manager_fork(m, 7, 9) == FS_OK, "fork");
  int32_t next = 4242;
  int64_t slot9 = -1;
  CHECK(fs_block_manager_allocate_slots(m, 9, 1, &next, &slot9, copies, 1, &ncopies) == FS_OK && ncopies == 1 &&
            copies[0] == table[2] && copies[1] != table[2],
        "copy-on-write of the partial block");
  CHECK(fs_kv_copy_blocks(s, copies, ncopies, NULL) == FS_OK, "copy blocks");
  for (int l = 0; l < L; ++l)
    for (int g = 0; g < HK; ++g)
      for (int d = 0; d < D; ++d) knew[l][PROMPT][g][d] = uniform(), vnew[l][PROMPT][g][d] = uniform();
  float k1[L * HK * D], v1[L * HK * D];
  for (int l = 0; l < L; ++l) {
    memcpy(k1 + l * HK * D, knew[l][PROMPT], sizeof(float) * HK * D);
    memcpy(v1 + l * HK * D, vnew[l][PROMPT], sizeof(float) * HK * D);
  }
  CHECK(fs_kv_append(s, 0, L, k1, v1, &slot9, 1, NULL) == FS_OK, "append 9's token");
  int32_t table9[MAXB];
  CHECK(fs_block_manager_block_table(m, 9, table9, MAXB, &len) == FS_OK && len == 3 && table9[2] == copies[1],
        "9 owns the copy");
  for (int l = 0; l < L; ++l) {
    CHECK(decode_error(s, l, table9, 3, PROMPT + 1, &knew[l][0][0][0], &vnew[l][0][0][0]) < 1e-5,
          "child sees the prefix and its token");
    CHECK(decode_error(s, l, table, 3, PROMPT, &knew[l][0][0][0], &vnew[l][0][0][0]) < 1e-5,
          "parent unchanged by the child's write");
  }

  /* Out of blocks: a normal result, nothing changes. */
  CHECK(fs_block_manager_stats_get(m, &st) == FS_OK, "stats");
  const int32_t free_before = st.num_free_blocks;
  int32_t big[64];
  for (int i = 0; i < 64; ++i) big[i] = 7000 + i;
  CHECK(fs_block_manager_add_sequence(m, 10, big, 40, 0, NULL) == FS_OK, "add a long one");
  static int64_t bigslots[64];
  CHECK(fs_block_manager_allocate_slots(m, 10, 40, NULL, bigslots, copies, 1, &ncopies) == FS_RESOURCE_EXHAUSTED,
        "out of blocks");
  CHECK(fs_block_manager_stats_get(m, &st) == FS_OK && st.num_free_blocks == free_before, "nothing taken");

  /* Bad input: codes and messages, nothing written. */
  const int64_t bad_slot[2] = {0, (int64_t)NB * BS};
  CHECK(fs_kv_check_slots(s, bad_slot, 2) == FS_OUT_OF_RANGE, "slot past the pool");
  CHECK(fs_kv_append(s, 0, L, kbuf, vbuf, bad_slot, 2, NULL) == FS_OUT_OF_RANGE, "append refuses it");
  for (int l = 0; l < L; ++l)
    CHECK(decode_error(s, l, table, 3, PROMPT, &knew[l][0][0][0], &vnew[l][0][0][0]) < 1e-5,
          "the refused append wrote nothing");
  CHECK(fs_kv_append(s, 1, L, kbuf, vbuf, slots, 1, NULL) != FS_OK, "layers past the end");
  const int32_t bad_pair[2] = {1, NB};
  CHECK(fs_kv_copy_blocks(s, bad_pair, 1, NULL) == FS_OUT_OF_RANGE, "copy to a block past the pool");
  CHECK(fs_kv_storage_pages(s, L, NULL) == FS_INVALID_ARGUMENT, "null out");
  fs_pages pg;
  CHECK(fs_kv_storage_pages(s, L, &pg) == FS_OUT_OF_RANGE, "layer past the end");
  CHECK(fs_block_manager_allocate_slots(m, 12345, 1, NULL, slots, copies, 1, &ncopies) != FS_OK,
        "unknown sequence");
  CHECK(fs_block_manager_free_sequence(m, 12345) != FS_OK, "free of an unknown sequence");
  CHECK(fs_block_manager_fork(m, 7, 9) != FS_OK, "fork onto a live id");
  CHECK(fs_block_manager_add_sequence(m, 11, prompt, 0, 0, NULL) == FS_INVALID_ARGUMENT, "empty prompt");
  CHECK(fs_block_manager_block_table(m, 7, table, 1, &len) == FS_OUT_OF_RANGE && len == 3, "table too small");
  fs_block_manager_config bad = {NB, 3, 1, 0};
  fs_block_manager* m2 = NULL;
  CHECK(fs_block_manager_create(&bad, &m2) == FS_INVALID_ARGUMENT && m2 == NULL, "block size 3");
  fs_kv_shape bad_shape = shape;
  bad_shape.dtype = 9;
  fs_kv_storage* s2 = NULL;
  CHECK(fs_kv_storage_create(FS_DEVICE_CPU, &bad_shape, &s2) == FS_INVALID_ARGUMENT && s2 == NULL, "dtype 9");
  CHECK(fs_block_manager_blocks_needed(NULL, 7, 1) == -1, "null manager");

  /* Everything back: free all and the pool is whole. */
  CHECK(fs_block_manager_free_sequence(m, 7) == FS_OK && fs_block_manager_free_sequence(m, 9) == FS_OK &&
            fs_block_manager_free_sequence(m, 10) == FS_OK,
        "free all");
  CHECK(fs_block_manager_stats_get(m, &st) == FS_OK && st.num_free_blocks == st.num_usable_blocks &&
            st.num_sequences == 0,
        "pool whole again");
  fs_kv_storage_destroy(s);
  fs_block_manager_destroy(m);
  fs_kv_storage_destroy(NULL);
  fs_block_manager_destroy(NULL);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
