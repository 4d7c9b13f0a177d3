// With libFuzzer (FLASHSERVE_LIBFUZZER=ON) the fuzzer drives the targets and keeps its own
// counts: the loop's hooks do nothing here, and the seeds reach libFuzzer as a corpus directory.
#include "tests/fuzz/fuzz.h"

namespace flashserve::fuzz {
void note(bool) {}
}  // namespace flashserve::fuzz
