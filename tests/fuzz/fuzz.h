// The fuzz targets of tests/fuzz/ (issue 24): each file defines libFuzzer's entry point
// LLVMFuzzerTestOneInput for one reader of untrusted bytes, its seeds (valid inputs built in
// code, so the mutations start deep inside the format) and a dictionary of tokens worth
// splicing in. fuzz_loop.cc drives them without libFuzzer (gcc, the ASan+UBSan build of CI);
// with clang, -DFLASHSERVE_LIBFUZZER=ON links them with libFuzzer itself instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace flashserve::fuzz {

// Valid inputs of the target's format (each must be accepted: the loop checks it).
std::vector<std::string> seeds();
// Tokens the loop splices into inputs (keys, magic numbers, JSON punctuation).
std::vector<std::string> dictionary();
// Called by the target once an input: whether the reader accepted it (the loop reports the
// share, and checks every seed was accepted).
void note(bool accepted);

}  // namespace flashserve::fuzz
