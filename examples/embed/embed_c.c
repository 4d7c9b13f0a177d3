/* A C program using the installed C ABI: split-K decode on the CPU over a two-page cache, one
 * query against three keys whose logits are equal, so o is the mean of the values. */
#include <flashserve_c.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  enum { D = 8, BS = 2 };
  float k[3 * BS * D], v[3 * BS * D], q[D], o[D], lse[1];
  memset(k, 0, sizeof k); /* equal logits */
  for (int i = 0; i < 3 * BS * D; ++i) v[i] = (float)(i % 5) - 2.0f;
  for (int i = 0; i < D; ++i) q[i] = 1.0f;
  const int32_t table[2] = {1, 2}, len = 3;
  fs_decode_args a;
  memset(&a, 0, sizeof a);
  a.device = FS_DEVICE_CPU;
  a.dtype = FS_FLOAT32;
  a.batch = 1;
  a.q_len = 1;
  a.num_heads = a.num_kv_heads = 1;
  a.head_dim = D;
  a.q = q;
  a.q_row_stride = a.q_head_stride = D;
  a.pages = (fs_pages){k, v, BS * D, BS * D, D, 3, BS, table, 2, &len};
  a.mask.softmax_scale = 0.35f;
  a.mask.causal = 1;
  a.mask.window_left = a.mask.window_right = -1;
  a.o = o;
  a.o_row_stride = a.o_head_stride = D;
  a.lse = lse;
  if (fs_decode_run(&a, NULL) != FS_OK) {
    fprintf(stderr, "decode: %s\n", fs_last_error());
    return 1;
  }
  for (int d = 0; d < D; ++d) {
    const float want = (v[(1 * BS + 0) * D + d] + v[(1 * BS + 1) * D + d] + v[(2 * BS + 0) * D + d]) / 3;
    if (fabsf(o[d] - want) > 1e-6f) {
      fprintf(stderr, "o[%d] = %f, want %f\n", d, o[d], want);
      return 1;
    }
  }
  printf("embed_c: decode through the C ABI ok (lse %.4f = ln 3)\n", lse[0]);
  return 0;
}
