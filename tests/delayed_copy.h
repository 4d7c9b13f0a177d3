// A test kernel that stands in for the kernel before decode in a model step (the one that
// appends the new K/V, or updates the block table): it lets its programmatic dependents launch
// at once (griddepcontrol.launch_dependents, sm_90+), then waits, then writes. A decode launched
// after it on the same stream starts while it waits, so whatever decode reads before its own
// griddepcontrol.wait sees the old bytes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashserve::test {

struct DelayedCopies {
  static constexpr int kMax = 8;
  struct Copy {
    void* dst = nullptr;
    const void* src = nullptr;
    int64_t bytes = 0;  // a multiple of 4, both pointers 4-byte aligned
  } copies[kMax];
  int count = 0;
  uint64_t delay_ns = 0;  // spun before the first write
};

// One launch (a few CTAs); every copy is done when the kernel ends.
cudaError_t launch_delayed_copies(const DelayedCopies& c, cudaStream_t stream);

}  // namespace flashserve::test
