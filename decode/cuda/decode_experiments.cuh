// Bench-only probes of the CUDA split-K decode kernel: ablations that compute wrong results on
// purpose (timing only) and per-CTA trace stamps. Included by decode_kernel.cuh only in a build
// configured with -DFLASHSERVE_DECODE_EXPERIMENTS=ON (CMakeLists.txt; default OFF), which defines
// FLASHSERVE_DECODE_EXPERIMENTS for flashserve_core alone; no shipped or installed build sees
// this file (the install copies no decode/cuda header). The kernel names the hook points
// (FS_DECODE_SKIPS, FS_DECODE_STAMP*); decode_kernel.cuh defines them as the plain steps when
// this file is not included.
//
// The modes, chosen at configure time:
// -DFLASHSERVE_DECODE_EXPERIMENT=N (bench/history/decode.md "Where the split kernel's time goes"):
//   1 copies only (no compute in the loop), 2 compute only (the first stages' data, no further
//   copies), 3 no P·V, 4 no softmax, 5 no Q·Kᵀ; 6 (a mutation check, not a timing): no
//   griddepcontrol.wait, which DecodeCuda.BackToBackCallsShareOneWorkspace must catch.
// -DFLASHSERVE_DECODE_TRACE=ON (bench/trace_decode.py, bench/sm_speed.py): each CTA writes its SM
//   id and the global timer at its start (after griddepcontrol.wait), when its first stages'
//   copies are issued, when its first tile has landed, after its last tile and at its end, into
//   the last bytes of the workspace (the caller makes room: 6 words a CTA).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "decode/params.h"

#ifndef FLASHSERVE_DECODE_EXPERIMENT
#define FLASHSERVE_DECODE_EXPERIMENT 0
#endif

namespace flashserve::cuda::decode_probe {

inline constexpr int kExperiment = FLASHSERVE_DECODE_EXPERIMENT;
static_assert(kExperiment >= 0 && kExperiment <= 6, "FLASHSERVE_DECODE_EXPERIMENT: 0 (none) to 6");

// FS_DECODE_SKIPS(step, ...): whether the kernel leaves the step out. Where a step is left out,
// a stand-in keeps what the compiler would otherwise drop with it.
__device__ __forceinline__ bool skips_grid_wait() { return kExperiment == 6; }
__device__ __forceinline__ bool skips_copies_after_the_first() { return kExperiment == 2; }
__device__ __forceinline__ bool skips_compute() { return kExperiment == 1; }
__device__ __forceinline__ bool skips_qk(float& s00, int lane, int tile) {
  if (kExperiment != 5) return false;
  s00 = static_cast<float>(lane + tile) * 1e-3f;
  return true;
}
__device__ __forceinline__ bool skips_softmax() { return kExperiment == 4; }
__device__ __forceinline__ bool skips_pv(float& acc00, const uint32_t (&pa)[4]) {
  if (kExperiment != 3) return false;
  acc00 += __uint_as_float(pa[0] ^ pa[1] ^ pa[2] ^ pa[3]);
  return true;
}

__device__ __forceinline__ uint64_t global_timer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The CTA's stamps, only where the caller made room past the partial states (trace_decode.py
// does).
template <int kHeadDim>
__device__ __forceinline__ void write_stamps(const DecodeParams& p, int64_t total_rows, int tid, uint64_t t_start,
                                             uint64_t t_issued, uint64_t t_first, uint64_t t_loop) {
  const int64_t trace_bytes = 48 * static_cast<int64_t>(gridDim.x) * gridDim.y * gridDim.z;
  // (With one split there are no partial states: the whole workspace is the caller's room.)
  const int64_t states_bytes =
      p.num_splits > 1 ? static_cast<int64_t>(p.num_splits) * total_rows * (kHeadDim + 1) * 4 : 0;
  if (tid == 0 && p.workspace != nullptr && p.workspace_bytes >= states_bytes + trace_bytes) {
    const int64_t cta = (static_cast<int64_t>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const int64_t ctas = static_cast<int64_t>(gridDim.x) * gridDim.y * gridDim.z;
    uint64_t* trace = reinterpret_cast<uint64_t*>(static_cast<char*>(p.workspace) + p.workspace_bytes) - 6 * ctas;
    uint32_t smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    trace[6 * cta] = smid;
    trace[6 * cta + 1] = t_start;
    trace[6 * cta + 2] = t_issued;
    trace[6 * cta + 3] = t_first;
    trace[6 * cta + 4] = t_loop;
    trace[6 * cta + 5] = global_timer();
  }
}

}  // namespace flashserve::cuda::decode_probe

#define FS_DECODE_SKIPS(step, ...) ::flashserve::cuda::decode_probe::skips_##step(__VA_ARGS__)
#ifdef FLASHSERVE_DECODE_TRACE
#define FS_DECODE_STAMP(var) const uint64_t var = ::flashserve::cuda::decode_probe::global_timer()
#define FS_DECODE_STAMP_LATER(var) uint64_t var = 0
#define FS_DECODE_STAMP_IF(var, cond) \
  if (cond) var = ::flashserve::cuda::decode_probe::global_timer()
#define FS_DECODE_STAMPS_OUT(p, total_rows, head_dim, tid, t_start, t_issued, t_first, t_loop) \
  ::flashserve::cuda::decode_probe::write_stamps<head_dim>(p, total_rows, tid, t_start, t_issued, t_first, t_loop)
#else
#define FS_DECODE_STAMP(var)
#define FS_DECODE_STAMP_LATER(var)
#define FS_DECODE_STAMP_IF(var, cond)
#define FS_DECODE_STAMPS_OUT(...)
#endif
