// Instruction rates of the conversions the attention kernels issue (a diagnostic, not part of the
// library): thread-operations a clock an SM of each kind, alone and in pairs, to learn which share
// a pipe. The prefill tile issues per key x query row one EX2 and half a bf16 pack
// (cvt.rn.bf16x2.f32), and over FP8 pages per key x dim half an e4m3 pair conversion
// (cvt.rn.f16x2.e4m3x2); a pipe they share with each other or with the softmax's integer work
// (FMNMX, PRMT) can set a tile's pace. Measured on an H100: bench/history/prefill.md, "Session 34".
//
// Each thread runs 8 independent chains of each kind in its configuration (each op's result feeds
// the next op of its chain), 1024 threads a CTA, one CTA an SM; the slowest CTA's clock64 span
// around the loop gives the rate. The integer forms are exact for what the kernels feed them:
//  - bf16 pack by integer rounding: (bits + 0x8000) >> 16 of two floats, joined by PRMT (round to
//    nearest, ties away from zero: differs from cvt.rn only on exact ties);
//  - e4m3 pair to fp16 pair x 2^-8 by PRMT (sign-replicating) + shift + LOP3.
//
// Build: the CMake target pipe_rates (into build-gpu/tools/). Run: build-gpu/tools/pipe_rates
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "cuda_check.h"

namespace {

constexpr int kChains = 8, kThreads = 1024;

__device__ __forceinline__ float ex2(float x) {
  asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x));
  return x;
}
__device__ __forceinline__ uint32_t cvt_bf16x2(uint32_t a, float b) {
  uint32_t r;
  asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(__uint_as_float(a)));
  return r;
}
__device__ __forceinline__ uint32_t alu_bf16x2(uint32_t a, uint32_t b) {
  uint32_t r;
  asm volatile("{ .reg .b32 x, y; add.u32 x, %1, 0x8000; add.u32 y, %2, 0x8000; prmt.b32 %0, x, y, 0x7632; }"
               : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ uint32_t cvt_e4m3x2(uint32_t a) {
  uint32_t r;
  asm volatile("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.rn.f16x2.e4m3x2 %0, l; }" : "=r"(r) : "r"(a));
  return r;
}
// A word's high half moved down: by a shift (SHF), or by a multiply-high by 2^16 (IMAD.HI), the
// two ways to feed the low-half conversion codes 2 and 3 of a word (FLASHSERVE_FP8_HI_BY_IMAD).
__device__ __forceinline__ uint32_t shf_hi(uint32_t a) {
  uint32_t r;
  asm volatile("shf.r.wrap.b32 %0, %1, %1, 16;" : "=r"(r) : "r"(a));  // (a rotation: ptxas folds shifts of shifts)
  return r;
}
__device__ __forceinline__ uint32_t imad_hi(uint32_t a) {  // (its chain dies out to 0: no matter to its time)
  uint32_t r;
  asm volatile("mul.hi.u32 %0, %1, 65536;" : "=r"(r) : "r"(a));
  return r;
}
__device__ __forceinline__ uint32_t alu_e4m3x2(uint32_t a) {
  uint32_t r;
  asm volatile("{ .reg .b32 y; prmt.b32 y, %1, 0, 0x9180; shl.b32 y, y, 7; and.b32 %0, y, 0xBF80BF80; }"
               : "=r"(r) : "r"(a));
  return r;
}

__device__ __forceinline__ uint32_t prmt(uint32_t a) {
  uint32_t r;
  asm volatile("prmt.b32 %0, %1, 0, 0x0123;" : "=r"(r) : "r"(a));
  return r;
}
__device__ __forceinline__ uint32_t imad(uint32_t a) {
  uint32_t r;
  asm volatile("mad.lo.u32 %0, %1, 3, 1;" : "=r"(r) : "r"(a));
  return r;
}
__device__ __forceinline__ float fmnmx(float a) {
  float r;
  asm volatile("max.f32 %0, %1, 0f3F000000;" : "=f"(r) : "f"(a));
  return r;
}

// The ops a configuration runs, one each a chain an iteration, each on a chain of its own kind.
enum Op : unsigned {
  kEx2 = 1, kCvtBf16 = 2, kAluBf16 = 4, kCvtE4m3 = 8, kAluE4m3 = 16, kPrmt = 32, kImad = 64, kFmnmx = 128,
  kShf = 256, kImadHi = 512
};

template <unsigned kOps>
__global__ void __launch_bounds__(kThreads, 1) rates(int iters, unsigned long long* cycles, uint32_t* sink) {
  float f[kChains], g[kChains];
  uint32_t u[kChains], w[kChains], x[kChains], y[kChains], z[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) {
    f[c] = -0.001f * static_cast<float>(threadIdx.x + c);
    g[c] = f[c];
    u[c] = 0x3c3c3c3cu ^ (threadIdx.x * 0x01010101u + c);
    w[c] = u[c] + 1;
    x[c] = u[c] + 2;
    y[c] = u[c] + 3;
    z[c] = u[c] + 4;
  }
  __syncthreads();
  const long long t0 = clock64();
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      if constexpr ((kOps & kEx2) != 0) f[c] = ex2(f[c]);
      if constexpr ((kOps & kCvtBf16) != 0) u[c] = cvt_bf16x2(u[c], 0.5f);
      if constexpr ((kOps & kAluBf16) != 0) u[c] = alu_bf16x2(u[c], 0x3f000000u);
      if constexpr ((kOps & kCvtE4m3) != 0) w[c] = cvt_e4m3x2(w[c]);
      if constexpr ((kOps & kAluE4m3) != 0) x[c] = alu_e4m3x2(x[c]);
      if constexpr ((kOps & kPrmt) != 0) y[c] = prmt(y[c]);
      if constexpr ((kOps & kImad) != 0) y[c] = imad(y[c]);
      if constexpr ((kOps & kFmnmx) != 0) g[c] = fmnmx(g[c]);
      if constexpr ((kOps & kShf) != 0) z[c] = shf_hi(z[c]);
      if constexpr ((kOps & kImadHi) != 0) z[c] = imad_hi(z[c]);
    }
  }
  __syncthreads();
  const long long t1 = clock64();
  uint32_t acc = 0;
#pragma unroll
  for (int c = 0; c < kChains; ++c)
    acc ^= u[c] ^ w[c] ^ x[c] ^ y[c] ^ z[c] ^ __float_as_uint(f[c]) ^ __float_as_uint(g[c]);
  sink[blockIdx.x * kThreads + threadIdx.x] = acc;
  if (threadIdx.x == 0) cycles[blockIdx.x] = static_cast<unsigned long long>(t1 - t0);
}

template <unsigned kOps>
void run(const char* name, int sms, unsigned long long* d_cycles, uint32_t* d_sink) {
  const int iters = 4096;
  rates<kOps><<<sms, kThreads>>>(64, d_cycles, d_sink);  // warm
  CHECK(cudaGetLastError());
  rates<kOps><<<sms, kThreads>>>(iters, d_cycles, d_sink);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  unsigned long long* h = new unsigned long long[sms];
  CHECK(cudaMemcpy(h, d_cycles, sms * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  unsigned long long mx = 0, mn = ~0ull;
  for (int i = 0; i < sms; ++i) {
    mx = h[i] > mx ? h[i] : mx;
    mn = h[i] < mn ? h[i] : mn;
  }
  delete[] h;
  // Thread-operations of each kind a clock an SM (every kind runs as often), from the slowest CTA.
  const double ops = static_cast<double>(kThreads) * iters * kChains;
  std::printf("%-30s %6.2f ops/clk/SM of each kind   cycles %llu..%llu\n", name, ops / static_cast<double>(mx), mn, mx);
}

}  // namespace

int main() {
  int dev = 0, sms = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf("%s, %d SMs; 8 chains x 1024 threads, one CTA an SM\n", prop.name, sms);
  unsigned long long* d_cycles = nullptr;
  uint32_t* d_sink = nullptr;
  CHECK(cudaMalloc(&d_cycles, sms * sizeof(unsigned long long)));
  CHECK(cudaMalloc(&d_sink, static_cast<size_t>(sms) * kThreads * sizeof(uint32_t)));
  run<kEx2>("ex2", sms, d_cycles, d_sink);
  run<kCvtBf16>("cvt bf16x2", sms, d_cycles, d_sink);
  run<kAluBf16>("alu bf16x2", sms, d_cycles, d_sink);
  run<kCvtE4m3>("cvt e4m3x2", sms, d_cycles, d_sink);
  run<kAluE4m3>("alu e4m3x2", sms, d_cycles, d_sink);
  run<kPrmt>("prmt", sms, d_cycles, d_sink);
  run<kImad>("imad", sms, d_cycles, d_sink);
  run<kFmnmx>("fmnmx", sms, d_cycles, d_sink);
  run<kEx2 | kCvtBf16>("ex2 + cvt bf16x2", sms, d_cycles, d_sink);
  run<kEx2 | kAluBf16>("ex2 + alu bf16x2", sms, d_cycles, d_sink);
  run<kEx2 | kCvtE4m3>("ex2 + cvt e4m3x2", sms, d_cycles, d_sink);
  run<kEx2 | kAluE4m3>("ex2 + alu e4m3x2", sms, d_cycles, d_sink);
  run<kCvtE4m3 | kAluE4m3>("cvt e4m3x2 + alu e4m3x2", sms, d_cycles, d_sink);
  run<kCvtE4m3 | kPrmt>("cvt e4m3x2 + prmt", sms, d_cycles, d_sink);
  run<kCvtE4m3 | kImad>("cvt e4m3x2 + imad", sms, d_cycles, d_sink);
  run<kCvtE4m3 | kFmnmx>("cvt e4m3x2 + fmnmx", sms, d_cycles, d_sink);
  run<kCvtE4m3 | kCvtBf16>("cvt e4m3x2 + cvt bf16x2", sms, d_cycles, d_sink);
  run<kCvtBf16 | kFmnmx>("cvt bf16x2 + fmnmx", sms, d_cycles, d_sink);
  run<kCvtBf16 | kPrmt>("cvt bf16x2 + prmt", sms, d_cycles, d_sink);
  run<kEx2 | kCvtBf16 | kCvtE4m3>("ex2 + cvt bf16x2 + cvt e4m3x2", sms, d_cycles, d_sink);
  // Session 35: the two ways to bring a word's high half down for the conversion (HI_BY_IMAD).
  run<kShf>("shf", sms, d_cycles, d_sink);
  run<kImadHi>("imad.hi", sms, d_cycles, d_sink);
  run<kCvtE4m3 | kShf>("cvt e4m3x2 + shf", sms, d_cycles, d_sink);
  run<kCvtE4m3 | kImadHi>("cvt e4m3x2 + imad.hi", sms, d_cycles, d_sink);
  CHECK(cudaFree(d_cycles));
  CHECK(cudaFree(d_sink));
  return 0;
}
