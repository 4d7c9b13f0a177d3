// A C++ program using the installed C++ API: packed varlen prefill on the CPU, two sequences,
// checked against a direct computation of the first row.
#include <cmath>
#include <cstdio>
#include <vector>

#include "attention/prefill.h"

int main() {
  using namespace flashserve;
  const int H = 2, D = 16;
  const std::vector<int32_t> cu = {0, 3, 8};  // sequences of 3 and 5 tokens
  std::vector<float> q(8 * H * D), k(q.size()), v(q.size()), o(q.size()), lse(8 * H);
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] = std::sin(0.3f * i);
    k[i] = std::cos(0.7f * i);
    v[i] = std::sin(1.1f * i + 1);
  }
  PrefillParams p;
  p.dtype = DType::kFloat32;
  p.batch = 2;
  p.num_heads = p.num_kv_heads = H;
  p.head_dim = D;
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.cu_seqlens_q = p.cu_seqlens_k = cu.data();
  p.total_q = p.total_k = 8;
  p.mask.softmax_scale = 0.25f;
  p.mask.causal = true;
  p.o = o.data();
  p.lse = lse.data();
  set_contiguous_strides(p);
  const Status st = prefill(p);
  if (!st.ok()) {
    std::fprintf(stderr, "prefill: %s\n", st.to_string().c_str());
    return 1;
  }
  // Row 0 (token 0, head 0) sees only key 0: o = v[key 0, head 0].
  for (int d = 0; d < D; ++d)
    if (std::fabs(o[d] - v[d]) > 1e-6f) return 1;
  std::printf("embed_cpp: prefill through the C++ API ok\n");
  return 0;
}
