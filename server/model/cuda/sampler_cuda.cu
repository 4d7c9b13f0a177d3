#include "server/model/cuda/sampler_cuda.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/cuda_check.h"

namespace flashserve::model {

namespace {

constexpr int kThreads = 1024;
constexpr int kMaxTopLogprobs = 20;  // logprobs_kernel's most top entries a row (engine::kMaxLogprobs)
// Banned tokens (eos and stop ids before min_tokens: up to the request's 1024 stop ids and the
// eos ids) as a bitmap of the vocabulary in shared memory, one bit a token: one load a logit
// whatever the count (a list scanned at every logit capped a row at 64).
// The candidates (the restricted rows' fast path): logits within kCandidateNats·temperature of
// the top (probabilities >= e^-16 of the top's), at most kCandidates of them, in shared memory.
constexpr int kCandidates = 4096;
constexpr float kCandidateNats = 16.f;
constexpr int kStaticSmem = 1024 + kCandidates * 4;  // the kernel's static shared memory, rounded up
// Masses in fixed point (units of 2^-40 of the top token's probability) where a threshold is
// decided by them: integer sums are the same in any order, so the same row draws the same token.
constexpr float kFixedOne = 1099511627776.f;  // 2^40

struct RowParams {
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  float u;  // the draw in [0, 1)
  int32_t banned_begin, banned_end;  // into the banned array
  int32_t pad;
};

// The block-wide reductions below end with each warp reducing the warps' partials itself, lane w
// reading warp w's (kThreads / 32 == 32 of them), by shuffles: every thread gets the same bits,
// and no loop walks the partials in shared memory. ptxas 13.0 miscompiled such a loop (31
// trips, rotated and unrolled by 4 in the PTX, which is right): its re-unrolled remainder read 8
// words too far, past the array (logprobs_kernel's block_best, compute-sanitizer on the H100,
// session 30; bench/NOTES.md, "Overlapped steps", "Session 30: located and fixed").
static_assert(kThreads / 32 == 32, "one warp's partial a lane");

// Block-wide sum (all threads get it).
__device__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // the last call's readers are done with scratch
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch[threadIdx.x % 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Block-wide sum of unsigned 64-bit values (all threads get it); exact, so order-free.
__device__ unsigned long long block_sum_u64(unsigned long long v, unsigned long long* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch[threadIdx.x % 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The block's most likely (value, id): the larger value, then the lower id (the host's order);
// every thread gets it. Safe to call again at once (it syncs before reusing red_v / red_i).
__device__ __forceinline__ bool more_likely(float av, int32_t ai, float bv, int32_t bi) {
  return av > bv || (av == bv && ai < bi);
}
__device__ __forceinline__ void warp_best(float& v, int32_t& id) {
  for (int w = 16; w > 0; w >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, w);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, id, w);
    if (more_likely(ov, oi, v, id)) {
      v = ov;
      id = oi;
    }
  }
}
__device__ __forceinline__ void block_best(float& v, int32_t& id, float* red_v, int32_t* red_i) {
  warp_best(v, id);
  __syncthreads();  // the last call's readers are done with red_v / red_i
  if (threadIdx.x % 32 == 0) {
    red_v[threadIdx.x / 32] = v;
    red_i[threadIdx.x / 32] = id;
  }
  __syncthreads();
  v = red_v[threadIdx.x % 32];
  id = red_i[threadIdx.x % 32];
  warp_best(v, id);
}

// A float's bits as an unsigned key in the floats' order (callers pass no NaN).
__device__ __forceinline__ uint32_t ordered_key(float x) {
  uint32_t b = __float_as_uint(x);
  if (b == 0x80000000u) b = 0u;  // -0 ties +0, as the host compares them
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Two CTAs an SM (32 registers; without the bound the candidates' path took 57, one CTA an SM).
// out: [rows] tokens, then [rows] flags (1 where the candidates decided the row's thresholds);
// drawn (may be null): [rows] the tokens again, where the next step's placeholders read them.
__global__ void __launch_bounds__(kThreads, 2) sample_kernel(const float* logits, int32_t vocab,
                                                          const RowParams* params, const int32_t* banned,
                                                          int32_t* out, int32_t* drawn, bool use_candidates) {
  const int row = blockIdx.x;
  const RowParams p = params[row];
  const float* l = logits + static_cast<int64_t>(row) * vocab;
  __shared__ float scratch[kThreads / 32];
  __shared__ float red_v[kThreads / 32];
  __shared__ int32_t red_i[kThreads / 32];
  extern __shared__ uint32_t ban_bits[];  // (vocab + 31) / 32 words when the call bans any token
  const int nb = p.banned_end - p.banned_begin;
  if (nb > 0) {
    for (int w = threadIdx.x; w < (vocab + 31) / 32; w += kThreads) ban_bits[w] = 0u;
    __syncthreads();
    for (int i = threadIdx.x; i < nb; i += kThreads) {
      const int32_t b = banned[p.banned_begin + i];  // in [0, vocab): the host dropped others
      atomicOr(&ban_bits[b >> 5], 1u << (b & 31));
    }
  }
  __syncthreads();
  auto logit = [&](int i) { return nb > 0 && ((ban_bits[i >> 5] >> (i & 31)) & 1u) ? -INFINITY : l[i]; };
  // Max and its lowest index.
  float best = -INFINITY;
  int32_t best_i = vocab;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float x = logit(i);
    if (x > best) {
      best = x;
      best_i = i;
    }
  }
  block_best(best, best_i, red_v, red_i);
  // No logit above -inf (every one banned, -inf or NaN): id 0, as the host's max_element gives
  // (the search above keeps only a strictly larger value: none, and vocab is no token).
  if (best_i == vocab) best_i = 0;
  if (p.temperature == 0.f || p.top_k == 1) {
    if (threadIdx.x == 0) {
      out[row] = best_i;
      out[gridDim.x + row] = 0;
      if (drawn != nullptr) drawn[row] = best_i;
    }
    return;
  }
  const float inv_t = 1.f / p.temperature;
  auto prob = [&](int i) { return __expf((logit(i) - best) * inv_t); };  // 1 at the top
  // The kept set: prob >= thr and, where the candidates decide it, a key (ordered_key of the
  // logit) >= key_thr: top_k's k-th largest logit and top_p's threshold, ties kept either way.
  float thr = p.min_p;  // min_p relative to the top probability, which is 1
  uint32_t key_thr = 0;
  const bool top_k = p.top_k > 0 && p.top_k < vocab, top_p = p.top_p < 1.f;
  bool decided = !top_k && !top_p;  // plain softmax or min_p alone: nothing to find
  bool by_candidates = false;
  // The fast path for top_k / top_p (the slow one below took ~80 passes over the vocabulary,
  // each a MUFU-bound ~5 us at 128k tokens on one SM): one pass gathers the logits within
  // kCandidateNats of the top into shared memory and sums the rest's mass (fixed point; for
  // top_k, windows up to 64x wider while fewer than k are in, without the mass); the
  // thresholds are then found by bisection over the candidates' ordered keys, 32 steps each
  // over at most kCandidates values. Where the candidates cannot decide (more than kCandidates
  // of them, k beyond them, or a nucleus reaching below them) the slow path does.
  if (!decided && use_candidates && isfinite(best)) {
    __shared__ float cand[kCandidates];
    __shared__ unsigned cand_n;
    __shared__ unsigned long long scratch64[kThreads / 32];
    unsigned long long tail = 0;  // the non-candidates' mass (top_p without top_k needs it)
    const unsigned lane = threadIdx.x % 32;
    // One pass: the logits >= cut into cand (their count in cand_n, past kCandidates too).
    auto collect = [&](float cut) {
      __syncthreads();  // every thread has read the last pass's count
      if (threadIdx.x == 0) cand_n = 0u;
      __syncthreads();
      tail = 0;
      for (int base = 0; base < vocab; base += kThreads) {  // uniform trip count: the ballots
        const int i = base + static_cast<int>(threadIdx.x);
        const float x = i < vocab ? logit(i) : -INFINITY;
        const bool c = x >= cut;  // NaN and banned (-inf) are not candidates
        const unsigned ballot = __ballot_sync(0xffffffffu, c);
        if (ballot != 0u) {
          unsigned slot = 0;
          if (lane == static_cast<unsigned>(__ffs(ballot) - 1)) slot = atomicAdd(&cand_n, static_cast<unsigned>(__popc(ballot)));
          slot = __shfl_sync(0xffffffffu, slot, __ffs(ballot) - 1) + __popc(ballot & ((1u << lane) - 1u));
          if (c && slot < kCandidates) cand[slot] = x;
        }
        if (!top_k && !c && i < vocab) {
          const float q = prob(i);
          if (q > 0.f) tail += static_cast<unsigned long long>(q * kFixedOne);  // NaN: not counted
        }
      }
      __syncthreads();
      return cand_n;
    };
    unsigned n = collect(best - kCandidateNats * p.temperature);
    // top_k beyond the candidates (a low temperature leaves few within 16 nats): wider windows,
    // 4x each, while fewer than k and still room (passes without exps: top_k needs no tail).
    for (int widen = 1; top_k && n < static_cast<unsigned>(p.top_k) && n <= static_cast<unsigned>(kCandidates) &&
                        widen <= 3;
         ++widen)
      n = collect(best - kCandidateNats * p.temperature * static_cast<float>(1 << (2 * widen)));
    if (!top_k) tail = block_sum_u64(tail, scratch64);
    auto fixed = [&](float x) { return static_cast<unsigned long long>(__expf((x - best) * inv_t) * kFixedOne); };
    // Over the candidates: how many have a key >= t, and their mass (with a key >= also).
    auto count_key = [&](uint32_t t) {
      float c = 0.f;
      for (unsigned j = threadIdx.x; j < n; j += kThreads) c += ordered_key(cand[j]) >= t ? 1.f : 0.f;
      return block_sum(c, scratch);
    };
    auto mass_key = [&](uint32_t t, uint32_t also) {
      unsigned long long m = 0;
      for (unsigned j = threadIdx.x; j < n; j += kThreads) {
        const uint32_t key = ordered_key(cand[j]);
        if (key >= t && key >= also) m += fixed(cand[j]);
      }
      return block_sum_u64(m, scratch64);
    };
    // The largest key t that keeps enough (bit by bit from the top: exact, ties kept).
    auto bisect = [&](auto&& enough) {
      uint32_t t = 0;
      for (int bit = 31; bit >= 0; --bit)
        if (enough(t | (1u << bit))) t |= 1u << bit;
      return t;
    };
    bool fits = n <= static_cast<unsigned>(kCandidates) && (!top_k || static_cast<unsigned>(p.top_k) <= n);
    uint32_t tk = 0;
    if (fits && top_k) tk = bisect([&](uint32_t t) { return count_key(t) >= static_cast<float>(p.top_k); });
    if (fits) {
      // top_p's mass is of the top_k set (the host's rule), else of every token.
      const unsigned long long kept = mass_key(tk, 0);
      const unsigned long long total = top_k ? kept : kept + tail;
      uint32_t tp = 0;
      if (top_p) {
        // At least one unit: a need of 0 would keep nothing (top_p near 0 keeps the top token).
        const auto need = static_cast<unsigned long long>(
            fmax(1.0, ceil(static_cast<double>(p.top_p) * static_cast<double>(total))));
        if (kept >= need)
          tp = bisect([&](uint32_t t) { return mass_key(t, tk) >= need; });
        else
          fits = false;  // the nucleus reaches below the candidates
      }
      key_thr = tk > tp ? tk : tp;
    }
    decided = fits;
    by_candidates = fits;
  }
  if (!decided) {  // the slow path: bisections over the probabilities of the whole vocabulary
    auto count_ge = [&](float t) {
      float c = 0.f;
      for (int i = threadIdx.x; i < vocab; i += kThreads) c += prob(i) >= t ? 1.f : 0.f;
      return block_sum(c, scratch);
    };
    auto mass_ge = [&](float t) {
      float m = 0.f;
      for (int i = threadIdx.x; i < vocab; i += kThreads) {
        const float q = prob(i);
        m += q >= t ? q : 0.f;
      }
      return block_sum(m, scratch);
    };
    // top_k: the largest threshold that keeps at least k tokens.
    float t_k = 0.f;
    if (top_k) {
      float lo = 0.f, hi = 1.f;
      for (int it = 0; it < 40; ++it) {
        const float mid = 0.5f * (lo + hi);
        if (count_ge(mid) >= static_cast<float>(p.top_k)) lo = mid; else hi = mid;
      }
      t_k = lo;
    }
    thr = fmaxf(t_k, p.min_p);
    if (top_p) {
      // The largest threshold whose kept mass (within the top-k set) still reaches top_p.
      const float total_k = mass_ge(t_k);
      float lo = t_k, hi = 1.f;
      const float need = p.top_p * total_k;
      for (int it = 0; it < 40; ++it) {
        const float mid = 0.5f * (lo + hi);
        if (mass_ge(mid) >= need) lo = mid; else hi = mid;
      }
      thr = fmaxf(thr, lo);
    }
  }
  // The kept set's probabilities (zero ones never, not even by rounding).
  auto kept = [&](int i) {
    const float q = prob(i);
    return q > 0.f && q >= thr && (key_thr == 0u || ordered_key(logit(i)) >= key_thr) ? q : 0.f;
  };
  // Inverse CDF in vocabulary order: each thread owns a contiguous range.
  const int chunk = (vocab + kThreads - 1) / kThreads;
  const int begin = threadIdx.x * chunk, end = min(vocab, begin + chunk);
  float local = 0.f;
  for (int i = begin; i < end; ++i) local += kept(i);
  // The threads' ranges of the CDF by a scan of the locals (warp scan + warp totals). A thread's
  // range is [warp offset + the lane before's inclusive sum, warp offset + its own), so that
  // the ranges tile exactly in float (start + local would not: two threads could both take the
  // target); the warp offsets are one running sum, in warp order, the total its last value.
  float incl = local;
  for (int o = 1; o < 32; o <<= 1) {
    const float y = __shfl_up_sync(0xffffffffu, incl, o);
    if (threadIdx.x % 32 >= o) incl += y;
  }
  float excl = __shfl_up_sync(0xffffffffu, incl, 1);
  if (threadIdx.x % 32 == 0) excl = 0.f;
  __syncthreads();
  if (threadIdx.x % 32 == 31) scratch[threadIdx.x / 32] = incl;
  __syncthreads();
  // (The warps' totals from the lanes by shuffles: see block_sum on ptxas.)
  const float warp_total = scratch[threadIdx.x % 32];
  float warp_offset = 0.f, total = 0.f;
  for (int w = 0; w < kThreads / 32; ++w) {
    if (w == static_cast<int>(threadIdx.x / 32)) warp_offset = total;
    total += __shfl_sync(0xffffffffu, warp_total, w);
  }
  const float start = warp_offset + excl, stop = warp_offset + incl;
  const float target = p.u * total;
  __shared__ int32_t chosen;
  if (threadIdx.x == 0) chosen = best_i;  // rounding fallback: the top token
  __syncthreads();
  if (local > 0.f && target >= start && target < stop) {
    float acc = start;
    int32_t pick = -1;
    for (int i = begin; i < end; ++i) {
      const float q = kept(i);
      if (q == 0.f) continue;
      pick = i;
      acc += q;
      if (target < acc) break;
    }
    if (pick >= 0) chosen = pick;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    out[row] = chosen;
    out[gridDim.x + row] = by_candidates ? 1 : 0;
    if (drawn != nullptr) drawn[row] = chosen;
  }
}

// The log-probabilities of the rows that ask (token_logprobs on the device, sampler.h): block
// b takes row asks[2b] with asks[2b + 1] top entries (at most kMaxTopLogprobs). The raw logits'
// max (NaN as -inf), their sum of exps against it in fp32 (the host's is float64: ~1e-6 apart),
// then the sampled token's log p and the top k by k block-wide argmaxes, each below the last in
// the host's order (more likely first, ties to the lower id). out: a row's 1 + 2k words, the
// token's log p, then (id, log p) pairs, floats as their bits.
__global__ void __launch_bounds__(kThreads) logprobs_kernel(const float* logits, int32_t vocab, const int32_t* asks,
                                                            const int32_t* tokens, int32_t* out) {
  const int32_t row = asks[2 * blockIdx.x], k = min(asks[2 * blockIdx.x + 1], vocab);
  const float* l = logits + static_cast<int64_t>(row) * vocab;
  int32_t* o = out + static_cast<int64_t>(blockIdx.x) * (1 + 2 * kMaxTopLogprobs);
  __shared__ float scratch[kThreads / 32];
  auto logit = [&](int32_t i) {
    const float x = l[i];
    return isnan(x) ? -INFINITY : x;
  };
  struct Best {
    float v;
    int32_t id;
  };
  Best first{-INFINITY, vocab};
  for (int32_t i = threadIdx.x; i < vocab; i += kThreads)
    if (more_likely(logit(i), i, first.v, first.id)) first = {logit(i), i};
  __shared__ float red_v[kThreads / 32];
  __shared__ int32_t red_i[kThreads / 32];
  block_best(first.v, first.id, red_v, red_i);  // the max and its id: the top entry
  const float mx = first.v;
  float log_sum = 0.f, num_inf = 0.f;  // with mx = +inf: the +inf logits, each log(1 / num_inf)
  if (isfinite(mx)) {
    float sum = 0.f;
    for (int32_t i = threadIdx.x; i < vocab; i += kThreads) sum += expf(logit(i) - mx);
    log_sum = logf(block_sum(sum, scratch));
  } else if (mx > 0.f) {
    float c = 0.f;
    for (int32_t i = threadIdx.x; i < vocab; i += kThreads) c += logit(i) == INFINITY ? 1.f : 0.f;
    num_inf = block_sum(c, scratch);
  }
  auto logprob = [&](int32_t i) -> float {
    const float x = logit(i);
    if (mx == -INFINITY || x == -INFINITY) return -INFINITY;
    if (mx == INFINITY) return x == INFINITY ? -logf(num_inf) : -INFINITY;
    return (x - mx) - log_sum;
  };
  const int32_t token = tokens[row];
  if (threadIdx.x == 0) o[0] = __float_as_int(token >= 0 && token < vocab ? logprob(token) : -INFINITY);
  // The top k: each the most likely of the ids ranked below the one before.
  Best last = first;
  for (int32_t j = 0; j < k; ++j) {
    if (j > 0) {
      Best b{-INFINITY, vocab};
      for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {
        const float x = logit(i);
        if (more_likely(last.v, last.id, x, i) && more_likely(x, i, b.v, b.id)) b = {x, i};
      }
      block_best(b.v, b.id, red_v, red_i);
      last = b;
    }
    if (threadIdx.x == 0) {
      o[1 + 2 * j] = last.id;
      o[2 + 2 * j] = __float_as_int(logprob(last.id));
    }
  }
}

float float_of_bits(int32_t w) {
  float f;
  std::memcpy(&f, &w, sizeof f);
  return f;
}

}  // namespace

CudaSampler::~CudaSampler() {
  for (Slot& sl : slots_) {
    if (sl.done != nullptr) {
      cudaEventSynchronize(sl.done);  // no copy into its host buffer in flight
      cudaEventDestroy(sl.done);
    }
    cudaFree(sl.params);
    cudaFreeHost(sl.host);
  }
}

Status CudaSampler::sample(const float* logits, int32_t vocab, const std::vector<SampleRow>& rows, cudaStream_t stream,
                           std::vector<int32_t>* tokens) {
  FS_RETURN_IF_ERROR(launch(logits, vocab, rows, stream));
  return finish(tokens);
}

// A slot's device buffer (per-row parameters, banned ids, output tokens) and its pinned mirror
// (the parameters and banned ids to upload from, the tokens back: from pageable memory a copy
// would first wait for the stream's work, the whole step), grown to bytes. Called with no copy
// of the slot's in flight.
Status CudaSampler::grow(Slot& sl, int64_t bytes) {
  if (bytes > sl.capacity) {
    cudaFree(sl.params);
    sl.params = nullptr;
    sl.capacity = 0;
    FS_CUDA_RETURN_IF_ERROR(cudaMalloc(&sl.params, static_cast<size_t>(bytes)));
    sl.capacity = bytes;
  }
  if (bytes > sl.host_capacity) {
    cudaFreeHost(sl.host);
    sl.host = nullptr;
    sl.host_capacity = 0;
    void* p = nullptr;
    FS_CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, static_cast<size_t>(bytes)));
    sl.host = static_cast<char*>(p);
    sl.host_capacity = bytes;
  }
  if (sl.done == nullptr) FS_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&sl.done, cudaEventDisableTiming));
  return Status::Ok();
}

namespace {
// The results a launch copies back: [tokens n][flags n][logprobs m rows] (int32 words).
int64_t result_bytes(int64_t rows, int64_t asking) { return rows * 8 + asking * (1 + 2 * kMaxTopLogprobs) * 4; }
int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }
}  // namespace

int64_t CudaSampler::prepared_bytes_bound(int64_t rows, int64_t banned) {
  return rows * static_cast<int64_t>(sizeof(RowParams)) + (banned + 1) * 4 + 2 * rows * 4;
}

Status CudaSampler::reserve(int64_t rows, int64_t banned) {
  if (rows < 0 || banned < 0) return invalid_argument("CudaSampler::reserve: negative sizes");
  if (launched_ != finished_) return internal_error("CudaSampler::reserve: a launch not finished");
  // Its own upload's room too (every row asking for logprobs).
  const int64_t bytes = align256(result_bytes(rows, rows)) + prepared_bytes_bound(rows, banned);
  for (Slot& sl : slots_) {
    if (sl.done != nullptr) FS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(sl.done));
    FS_RETURN_IF_ERROR(grow(sl, bytes));
  }
  return Status::Ok();
}

Status CudaSampler::finish(std::vector<int32_t>* tokens, std::vector<TokenLogprobs>* logprobs) {
  logprobs_ready_ = false;
  candidate_rows_ = 0;
  if (finished_ == launched_) {  // nothing launched: nothing drawn
    tokens->clear();
    if (logprobs != nullptr) logprobs->clear();
    return Status::Ok();
  }
  Slot& sl = slots_[finished_ % 2];
  ++finished_;
  const int64_t n = sl.rows;
  tokens->assign(static_cast<size_t>(n), 0);
  if (logprobs != nullptr) logprobs->clear();  // entries only where the launch made them (below)
  if (n == 0) return Status::Ok();
  FS_RETURN_IF_ERROR(cuda_status(cudaEventSynchronize(sl.done), "sample"));
  std::memcpy(tokens->data(), sl.host, static_cast<size_t>(n) * 4);
  const auto* flags = reinterpret_cast<const int32_t*>(sl.host) + n;
  for (int64_t r = 0; r < n; ++r) candidate_rows_ += flags[r] != 0;
  if (sl.logprobs_launched) {
    logprobs_ready_ = true;
    if (logprobs != nullptr) {
      logprobs->assign(static_cast<size_t>(n), TokenLogprobs{});  // one a row; those that ask filled here
      const auto* words = reinterpret_cast<const int32_t*>(sl.host + n * 8);
      for (size_t a = 0; a < sl.asking.size(); ++a) {
        const auto [row, k] = sl.asking[a];
        const int32_t* w = words + a * (1 + 2 * kMaxTopLogprobs);
        TokenLogprobs& t = (*logprobs)[static_cast<size_t>(row)];
        t.token = (*tokens)[static_cast<size_t>(row)];
        t.logprob = float_of_bits(w[0]);
        for (int32_t j = 0; j < k; ++j) t.top.emplace_back(w[1 + 2 * j], float_of_bits(w[2 + 2 * j]));
      }
    }
  }
  return Status::Ok();
}

Status CudaSampler::launch(const float* logits, int32_t vocab, const std::vector<SampleRow>& rows, cudaStream_t stream,
                           bool logprobs, int32_t* drawn) {
  int64_t bytes = 0;
  FS_RETURN_IF_ERROR(prepare(vocab, rows, logprobs, &bytes));
  return launch_prepared(logits, stream, drawn);
}

// The next launch's parameters laid out in prepared_ ([params n][banned + 1][asks 2m], what the
// kernels read), and what launch_prepared needs of them.
Status CudaSampler::prepare(int32_t vocab, const std::vector<SampleRow>& rows, bool logprobs, int64_t* bytes) {
  Prepared& p = prepared_;
  p = Prepared{};
  p.vocab = vocab;
  const int64_t n = static_cast<int64_t>(rows.size());
  p.rows = n;
  std::vector<RowParams> params(static_cast<size_t>(n));
  std::vector<int32_t> banned;
  for (int64_t r = 0; r < n; ++r) {
    const SampleRow& s = rows[r];
    const auto begin = static_cast<int32_t>(banned.size());
    for (int32_t b : s.banned)
      if (b >= 0 && b < vocab) banned.push_back(b);  // others cannot be drawn anyway
    params[r] = {s.temperature, s.top_k, s.top_p, s.min_p, static_cast<float>(sample_uniform(s.seed, s.step)),
                 begin, static_cast<int32_t>(banned.size()), 0};
  }
  // The asking rows, for logprobs_kernel (all of them on the device, or none: a row asking for
  // more than it takes leaves them to the caller).
  if (logprobs) {
    bool fits = true;
    for (int64_t r = 0; r < n; ++r)
      if (rows[r].logprobs >= 0) {
        fits = fits && rows[r].logprobs <= kMaxTopLogprobs;
        p.asking.emplace_back(static_cast<int32_t>(r), std::min(rows[r].logprobs, vocab));
      }
    if (!fits || p.asking.empty()) p.asking.clear();
    p.logprobs = fits;
  }
  const int64_t m = static_cast<int64_t>(p.asking.size());
  // The bitmap's shared memory, only when some row bans a token.
  p.ban_smem = banned.empty() ? 0 : (static_cast<int64_t>(vocab) + 31) / 32 * 4;
  if (p.ban_smem > 48 * 1024 - kStaticSmem) {
    int device = 0, optin = 0;
    FS_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    FS_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (p.ban_smem > optin - kStaticSmem)
      return unsupported("GPU sampling: a vocabulary of " + std::to_string(vocab) +
                         " is too large for the banned-token bitmap in shared memory");
  }
  p.banned_at = n * static_cast<int64_t>(sizeof(RowParams));
  p.asks_at = p.banned_at + (static_cast<int64_t>(banned.size()) + 1) * 4;
  p.bytes = p.asks_at + 2 * m * 4;
  staged_.assign(static_cast<size_t>(p.bytes), 0);
  std::memcpy(staged_.data(), params.data(), n * sizeof(RowParams));
  if (!banned.empty()) std::memcpy(staged_.data() + p.banned_at, banned.data(), banned.size() * 4);
  for (int64_t a = 0; a < m; ++a) {
    reinterpret_cast<int32_t*>(staged_.data() + p.asks_at)[2 * a] = p.asking[a].first;
    reinterpret_cast<int32_t*>(staged_.data() + p.asks_at)[2 * a + 1] = p.asking[a].second;
  }
  p.ready = true;
  *bytes = p.bytes;
  return Status::Ok();
}

void CudaSampler::write_prepared(char* host) const {
  std::memcpy(host, staged_.data(), staged_.size());
}

Status CudaSampler::launch_prepared(const float* logits, cudaStream_t stream, int32_t* drawn, const char* uploaded) {
  Prepared& p = prepared_;
  if (!p.ready) return internal_error("CudaSampler::launch_prepared: nothing prepared");
  p.ready = false;
  if (launched_ - finished_ >= 2) return internal_error("CudaSampler::launch: two launches not finished");
  Slot& sl = slots_[launched_ % 2];
  const int64_t n = p.rows, m = static_cast<int64_t>(p.asking.size());
  // The slot's buffers: the results (device, and their pinned copy), then, without the caller's
  // upload, the parameters (pinned, then their copy on the device). Its last copy back (its
  // launch finished, or never launched) is done before its pinned buffer is written or grown: a
  // no-op but for a slot of a launch finished before its copy.
  const int64_t own_at = align256(result_bytes(n, m));
  if (sl.done != nullptr) FS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(sl.done));
  FS_RETURN_IF_ERROR(grow(sl, own_at + (uploaded == nullptr ? p.bytes : 0)));
  sl.rows = n;
  sl.asking = std::move(p.asking);
  sl.logprobs_launched = p.logprobs;
  if (n == 0) {  // finished in turn, with no tokens
    ++launched_;
    return Status::Ok();
  }
  char* base = static_cast<char*>(sl.params);
  // What is queued on the stream; where a part fails, the parts before it are waited for (they
  // read or write the slot's buffers, which the next launch reuses).
  const Status st = [&]() -> Status {
    if (uploaded == nullptr) {
      std::memcpy(sl.host + own_at, staged_.data(), static_cast<size_t>(p.bytes));
      FS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(base + own_at, sl.host + own_at, static_cast<size_t>(p.bytes),
                                              cudaMemcpyHostToDevice, stream));
      uploaded = base + own_at;
    }
    const auto* d_params = reinterpret_cast<const RowParams*>(uploaded);
    const auto* d_banned = reinterpret_cast<const int32_t*>(uploaded + p.banned_at);
    const auto* d_asks = reinterpret_cast<const int32_t*>(uploaded + p.asks_at);
    auto* d_out = reinterpret_cast<int32_t*>(base);
    if (p.ban_smem > 48 * 1024 - kStaticSmem)
      FS_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(sample_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(p.ban_smem)));
    // FLASHSERVE_SAMPLER_CANDIDATES=1 (read at each launch: A/B, tests) takes top_k / top_p by the
    // candidates; off by default until a GPU has run it (written in session 27 without one).
    const char* env = std::getenv("FLASHSERVE_SAMPLER_CANDIDATES");
    const bool candidates = env != nullptr && std::strcmp(env, "1") == 0;
    sample_kernel<<<static_cast<unsigned>(n), kThreads, static_cast<size_t>(p.ban_smem), stream>>>(
        logits, p.vocab, d_params, d_banned, d_out, drawn, candidates);
    FS_CUDA_CHECK_LAUNCH("sample kernel");
    if (m > 0) {
      logprobs_kernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(logits, p.vocab, d_asks, d_out, d_out + 2 * n);
      FS_CUDA_CHECK_LAUNCH("logprobs kernel");
    }
    FS_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(sl.host, d_out, static_cast<size_t>(result_bytes(n, m)), cudaMemcpyDeviceToHost, stream));
    return cuda_status(cudaEventRecord(sl.done, stream), "sample");
  }();
  if (!st.ok()) {  // not finished: the slot is the next launch's, once what was queued is done
    (void)cudaStreamSynchronize(stream);
    (void)cudaGetLastError();
    return st;
  }
  ++launched_;
  return Status::Ok();
}

}  // namespace flashserve::model
