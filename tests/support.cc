#include "tests/support.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include "common/thread_pool.h"

namespace flashserve::test {

std::string Problem::describe() const {
  std::ostringstream s;
  s << "seed=" << seed << " dtype=" << dtype_name(dtype) << " heads=" << num_heads << "/" << num_kv_heads
    << " head_dim=" << head_dim << " causal=" << causal << " window=(" << window_left << "," << window_right
    << ") alibi=" << alibi << " softcap=" << softcap << " logit_scale=" << logit_scale
    << " layout=" << (block_size ? "paged/" + std::to_string(block_size) : std::string("packed"))
    << (block_size && separate_pools ? "/separate" : "") << " seqs(q,k)=[";
  for (size_t i = 0; i < seqs.size(); ++i) s << (i ? " " : "") << seqs[i].q_len << "," << seqs[i].k_len;
  s << "]";
  return s.str();
}

int64_t Problem::total_q() const {
  int64_t n = 0;
  for (const auto& s : seqs) n += s.q_len;
  return n;
}

int64_t Problem::total_k() const {
  int64_t n = 0;
  for (const auto& s : seqs) n += s.k_len;
  return n;
}

namespace {

// Rounds to the storage type and stores into buf (packed).
void fill_rounded(std::vector<float>& vals, DType t, Buffer& buf) {
  buf.resize(static_cast<int64_t>(vals.size()) * dtype_size(t));
  for (size_t i = 0; i < vals.size(); ++i) {
    vals[i] = round_to(t, vals[i]);
    store_from_float(buf.data(), t, static_cast<int64_t>(i), vals[i]);
  }
}

}  // namespace

ProblemData make_data(const Problem& p) {
  ProblemData d;
  std::mt19937_64 rng(p.seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  const int64_t H = p.num_heads, Hk = p.num_kv_heads, D = p.head_dim;
  d.q.resize(static_cast<size_t>(p.total_q() * H * D));
  d.k.resize(static_cast<size_t>(p.total_k() * Hk * D));
  d.v.resize(d.k.size());
  for (auto& x : d.q) x = normal(rng) * p.logit_scale;
  for (auto& x : d.k) x = normal(rng);
  for (auto& x : d.v) x = normal(rng);
  fill_rounded(d.q, p.dtype, d.q_buf);
  fill_rounded(d.k, p.dtype, d.k_buf);
  fill_rounded(d.v, p.dtype, d.v_buf);
  if (p.alibi) {
    for (int h = 0; h < p.num_heads; ++h) d.alibi_slopes.push_back(std::exp2(-8.0f * (h + 1) / p.num_heads));
  }
  d.cu_seqlens_q.push_back(0);
  d.cu_seqlens_k.push_back(0);
  for (const auto& s : p.seqs) {
    d.cu_seqlens_q.push_back(d.cu_seqlens_q.back() + s.q_len);
    d.cu_seqlens_k.push_back(d.cu_seqlens_k.back() + s.k_len);
    d.seq_lens.push_back(s.k_len);
  }
  if (p.block_size == 0) return d;

  // Pages: block 0 reserved (never used), the rest handed out in a shuffled order so tables
  // are scattered and non-monotonic; a few spare blocks stay free. Free slots hold NaN: a
  // kernel that reads outside a sequence's keys fails.
  const int64_t bs = p.block_size;
  int64_t needed = 0, max_blocks = 0;
  for (const auto& s : p.seqs) {
    needed += (s.k_len + bs - 1) / bs;
    max_blocks = std::max<int64_t>(max_blocks, (s.k_len + bs - 1) / bs);
  }
  d.num_blocks = static_cast<int32_t>(needed + needed / 4 + 2);
  d.table_stride = max_blocks + 1;  // a spare entry per row, holding an invalid id
  std::vector<int32_t> ids(static_cast<size_t>(d.num_blocks - 1));
  std::iota(ids.begin(), ids.end(), 1);
  std::shuffle(ids.begin(), ids.end(), rng);
  d.block_table.assign(static_cast<size_t>(p.seqs.size() * d.table_stride), -7);
  const int64_t half = Hk * bs * D;  // one block's K (or V)
  d.block_stride = p.separate_pools ? half : 2 * half;
  d.v_offset = p.separate_pools ? d.num_blocks * half : half;
  const int64_t elems = 2 * d.num_blocks * half;
  d.pages.resize(elems * dtype_size(p.dtype));
  for (int64_t i = 0; i < elems; ++i)
    store_from_float(d.pages.data(), p.dtype, i, std::numeric_limits<float>::quiet_NaN());
  size_t next = 0;
  for (size_t b = 0; b < p.seqs.size(); ++b) {
    const int64_t k0 = d.cu_seqlens_k[b];
    for (int64_t j = 0; j < p.seqs[b].k_len; ++j) {
      if (j % bs == 0) d.block_table[b * d.table_stride + j / bs] = ids[next++];
      const int64_t block = d.block_table[b * d.table_stride + j / bs];
      for (int64_t h = 0; h < Hk; ++h) {
        const int64_t dst = block * d.block_stride + (h * bs + j % bs) * D;
        const int64_t src = ((k0 + j) * Hk + h) * D;
        for (int64_t x = 0; x < D; ++x) {
          store_from_float(d.pages.data(), p.dtype, dst + x, d.k[src + x]);
          store_from_float(d.pages.data(), p.dtype, d.v_offset + dst + x, d.v[src + x]);
        }
      }
    }
  }
  return d;
}

void point_pages(const Problem& p, const ProblemData& d, const void* pages, KVPageView* v) {
  *v = make_page_view(pages, p.dtype, d.num_blocks, p.num_kv_heads, p.block_size, p.head_dim,
                      v->block_table, v->block_table_stride, v->seq_lens);
  if (p.separate_pools) {  // the V pool after the K pool
    v->v_pages = static_cast<const char*>(pages) + d.v_offset * dtype_size(p.dtype);
    v->block_stride = d.block_stride;
  }
}

Problem decode_problem(const std::vector<int>& seq_lens, int q_len, int num_heads, int num_kv_heads, int head_dim,
                       DType dtype, int block_size, uint64_t seed) {
  Problem p;
  for (int len : seq_lens) p.seqs.push_back({q_len, std::max(len, q_len)});
  p.num_heads = num_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.dtype = dtype;
  p.causal = true;
  p.block_size = block_size;
  p.seed = seed;
  return p;
}

int32_t max_pages(const Problem& p) {
  int32_t m = 1;
  for (const auto& s : p.seqs) m = std::max(m, (s.k_len + p.block_size - 1) / p.block_size);
  return m;
}

Outputs make_outputs(const Problem& p) {
  Outputs out;
  const int64_t n = p.total_q() * p.num_heads * p.head_dim;
  out.o.resize(n * dtype_size(p.dtype));
  for (int64_t i = 0; i < n; ++i) store_from_float(out.o.data(), p.dtype, i, std::numeric_limits<float>::quiet_NaN());
  out.lse.assign(static_cast<size_t>(p.total_q() * p.num_heads), std::numeric_limits<float>::quiet_NaN());
  return out;
}

namespace {

MaskParams mask_of(const Problem& p, const ProblemData& d) {
  MaskParams m;
  m.softmax_scale = 1.f / std::sqrt(static_cast<float>(p.head_dim));
  m.causal = p.causal;
  m.window_left = p.window_left;
  m.window_right = p.window_right;
  m.alibi_slopes = p.alibi ? d.alibi_slopes.data() : nullptr;
  m.softcap = p.softcap;
  return m;
}

KVPageView pages_of(const Problem& p, const ProblemData& d) {
  KVPageView v;
  point_pages(p, d, d.pages.data(), &v);
  v.block_table = d.block_table.data();
  v.block_table_stride = d.table_stride;
  v.seq_lens = d.seq_lens.data();
  return v;
}

}  // namespace

PrefillParams prefill_params(const Problem& p, ProblemData& d, Outputs& out) {
  PrefillParams pp;
  pp.device = Device::kCPU;
  pp.dtype = p.dtype;
  pp.batch = static_cast<int32_t>(p.seqs.size());
  pp.num_heads = p.num_heads;
  pp.num_kv_heads = p.num_kv_heads;
  pp.head_dim = p.head_dim;
  pp.q = d.q_buf.data();
  pp.cu_seqlens_q = d.cu_seqlens_q.data();
  pp.total_q = p.total_q();
  pp.paged = p.block_size > 0;
  pp.total_k = p.total_k();  // paged: the hint (the sum of seq_lens)
  if (pp.paged) {
    pp.pages = pages_of(p, d);
  } else {
    pp.k = d.k_buf.data();
    pp.v = d.v_buf.data();
    pp.cu_seqlens_k = d.cu_seqlens_k.data();
  }
  pp.mask = mask_of(p, d);
  pp.o = out.o.data();
  pp.lse = out.lse.data();
  set_contiguous_strides(pp);
  return pp;
}

DecodeParams decode_params(const Problem& p, ProblemData& d, Outputs& out) {
  DecodeParams dp;
  dp.device = Device::kCPU;
  dp.dtype = p.dtype;
  dp.batch = static_cast<int32_t>(p.seqs.size());
  dp.q_len = p.seqs.empty() ? 1 : p.seqs[0].q_len;
  dp.num_heads = p.num_heads;
  dp.num_kv_heads = p.num_kv_heads;
  dp.head_dim = p.head_dim;
  dp.q = d.q_buf.data();
  dp.pages = pages_of(p, d);
  dp.mask = mask_of(p, d);
  dp.o = out.o.data();
  dp.lse = out.lse.data();
  set_contiguous_strides(dp);
  return dp;
}

Reference reference(const Problem& p, const ProblemData& d) {
  Reference r;
  const int64_t H = p.num_heads, Hk = p.num_kv_heads, D = p.head_dim;
  const int64_t group = H / Hk;
  r.o.assign(static_cast<size_t>(p.total_q() * H * D), 0.0);
  r.lse.assign(static_cast<size_t>(p.total_q() * H), -INFINITY);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const int64_t B = static_cast<int64_t>(p.seqs.size());
  std::vector<double> max_logit(static_cast<size_t>(B * H), 0.0), max_lowp(static_cast<size_t>(B * H), 0.0);
  ThreadPool::global().parallel_for(B * H, [&](int64_t item) {
    const int64_t b = item / H, h = item % H, hk = h / group;
    const int64_t q_len = p.seqs[b].q_len, k_len = p.seqs[b].k_len;
    const int64_t q0 = d.cu_seqlens_q[b], k0 = d.cu_seqlens_k[b];
    std::vector<double> s(static_cast<size_t>(k_len));
    std::vector<char> visible(static_cast<size_t>(k_len));
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t q_pos = k_len - q_len + i;  // bottom-right aligned
      const float* qv = &d.q[((q0 + i) * H + h) * D];
      double mx = -INFINITY;
      for (int64_t j = 0; j < k_len; ++j) {
        bool vis = true;
        if (p.causal && j > q_pos) vis = false;
        if (p.window_left >= 0 && j < q_pos - p.window_left) vis = false;
        if (p.window_right >= 0 && j > q_pos + p.window_right) vis = false;
        visible[j] = vis;
        if (!vis) continue;
        const float* kv = &d.k[((k0 + j) * Hk + hk) * D];
        double dot = 0;
        for (int64_t x = 0; x < D; ++x) dot += static_cast<double>(qv[x]) * kv[x];
        double logit = dot * scale;
        if (p.softcap > 0) logit = p.softcap * std::tanh(logit / p.softcap);
        if (p.alibi) logit -= static_cast<double>(d.alibi_slopes[h]) * std::fabs(static_cast<double>(q_pos - j));
        s[j] = logit;
        mx = std::max(mx, logit);
        max_logit[item] = std::max(max_logit[item], std::fabs(dot * scale));
      }
      if (mx == -INFINITY) continue;  // no visible key: o = 0, lse = -inf
      double sum = 0;
      double* o = &r.o[((q0 + i) * H + h) * D];
      std::vector<double> lowp(static_cast<size_t>(D), 0.0);
      for (int64_t j = 0; j < k_len; ++j) {
        if (!visible[j]) continue;
        const double w = std::exp(s[j] - mx);
        const double w_low = round_to(p.dtype, static_cast<float>(w));
        sum += w;
        const float* vv = &d.v[((k0 + j) * Hk + hk) * D];
        for (int64_t x = 0; x < D; ++x) {
          o[x] += w * vv[x];
          lowp[x] += w_low * vv[x];
        }
      }
      for (int64_t x = 0; x < D; ++x) {
        o[x] /= sum;
        max_lowp[item] = std::max(max_lowp[item], std::fabs(lowp[x] / sum - o[x]));
      }
      r.lse[(q0 + i) * H + h] = mx + std::log(sum);
    }
  });
  for (double m : max_logit) r.max_abs_logit = std::max(r.max_abs_logit, m);
  for (double m : max_lowp) r.p_rounding_err = std::max(r.p_rounding_err, m);
  return r;
}

namespace {

double ulp_of(DType t) {
  switch (t) {
    case DType::kFloat32: return std::ldexp(1.0, -23);
    case DType::kFloat16: return std::ldexp(1.0, -10);
    case DType::kBFloat16: return std::ldexp(1.0, -7);
    case DType::kFp8E4M3: return std::ldexp(1.0, -3);
    case DType::kFp8E5M2: return std::ldexp(1.0, -2);
  }
  return 1.0;
}

}  // namespace

Tolerance tolerance_for(const Problem& p, const Reference& ref) {
  const double eps32 = std::ldexp(1.0, -24);
  // fp32 rounding of a logit of size L summed over head_dim terms; it moves softmax weights by
  // that much relative, and o (values ~N(0,1), |v| < 5) by up to 5 times that.
  const double logit_err = 4 * eps32 * std::max(1.0, ref.max_abs_logit) * std::sqrt(static_cast<double>(p.head_dim));
  Tolerance t;
  t.o_rel = ulp_of(p.dtype) + 16 * eps32;
  t.o_abs = 2e-6 + 5 * logit_err;
  t.lse_abs = 1e-5 + logit_err;
  t.lse_rel = 8 * eps32;
  return t;
}

std::string compare(const Problem& p, const Outputs& out, const Reference& ref, const Tolerance& tol) {
  const int64_t H = p.num_heads, D = p.head_dim;
  const int64_t rows = p.total_q() * H;
  std::ostringstream first;
  int64_t failures = 0;
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double lr = ref.lse[r];
    const double lk = out.lse[r];
    auto fail = [&](const std::string& what) {
      if (failures++ == 0) first << what << " at token " << r / H << " head " << r % H;
    };
    if (lr == -INFINITY) {
      if (lk != -INFINITY) fail("lse " + std::to_string(lk) + " but the row sees no key (want -inf)");
    } else {
      const double err = std::fabs(lk - lr);
      if (!(err <= tol.lse_abs + tol.lse_rel * std::fabs(lr)))
        fail("lse " + std::to_string(lk) + " vs reference " + std::to_string(lr));
    }
    for (int64_t x = 0; x < D; ++x) {
      const double ok = load_as_float(out.o.data(), p.dtype, r * D + x);
      const double orf = ref.o[r * D + x];
      const double err = std::fabs(ok - orf);
      const double bound = tol.o_abs + tol.o_rel * std::fabs(orf);
      if (lr == -INFINITY ? ok != 0.0 : !(err <= bound)) {
        std::ostringstream m;
        m.precision(9);
        m << "o[" << x << "] = " << ok << " vs reference " << orf << " (error " << err << ", bound " << bound << ")";
        fail(m.str());
      }
      if (std::isnan(err)) worst = INFINITY; else worst = std::max(worst, err / (bound > 0 ? bound : 1));
    }
  }
  if (failures == 0) return "";
  std::ostringstream s;
  s << failures << " element(s) out of tolerance; first: " << first.str() << "; worst error/bound " << worst
    << "\n  case: " << p.describe();
  return s.str();
}

std::string compare_outputs(const Problem& p, const Outputs& a, const Outputs& b, double ulps, double abs_slack) {
  const int64_t H = p.num_heads, D = p.head_dim, rows = p.total_q() * H;
  const double u = ulp_of(p.dtype);
  for (int64_t r = 0; r < rows; ++r) {
    const double la = a.lse[r], lb = b.lse[r];
    const bool both_empty = la == -INFINITY && lb == -INFINITY;
    if (!both_empty && !(std::fabs(la - lb) <= 2e-5 * (1 + std::fabs(la)))) {
      std::ostringstream m;
      m << "lse differs at token " << r / H << " head " << r % H << ": " << la << " vs " << lb << "\n  case: " << p.describe();
      return m.str();
    }
    for (int64_t x = 0; x < D; ++x) {
      const double va = load_as_float(a.o.data(), p.dtype, r * D + x);
      const double vb = load_as_float(b.o.data(), p.dtype, r * D + x);
      const double bound = ulps * u * std::max(std::fabs(va), std::fabs(vb)) + 4e-6 + abs_slack;
      if (!(std::fabs(va - vb) <= bound)) {
        std::ostringstream m;
        m.precision(9);
        m << "o differs at token " << r / H << " head " << r % H << " dim " << x << ": " << va << " vs " << vb
          << " (bound " << bound << ")\n  case: " << p.describe();
        return m.str();
      }
    }
  }
  return "";
}

}  // namespace flashserve::test
