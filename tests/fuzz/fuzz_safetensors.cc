// Fuzz target: the safetensors reader (server/model/safetensors.h) on untrusted bytes, and each
// tensor of a file it accepts read as fp32 with its own shape.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <unistd.h>

#include "server/model/safetensors.h"
#include "tests/fuzz/fuzz.h"

using namespace flashserve;
using namespace flashserve::model;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SafetensorsFile f;
  if (!SafetensorsFile::parse(std::vector<char>(data, data + size), "fuzz.safetensors", &f).ok()) {
    fuzz::note(false);
    return 0;
  }
  fuzz::note(true);
  for (const auto& [name, info] : f.tensors()) {
    if (info.numel() > (int64_t{1} << 22)) continue;  // bounded work an input
    std::vector<float> out;
    (void)f.read_f32(name, info.shape, &out);
  }
  return 0;
}

namespace flashserve::fuzz {

std::vector<std::string> seeds() {
  const std::vector<float> a = {1.f, -2.f, 3.5f, 0.25f, 7.f, -1e3f}, b = {0.5f, 1.5f};
  std::vector<std::string> out;
  const std::string path = "/tmp/flashserve_fuzz_seed_" + std::to_string(getpid()) + ".safetensors";
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    const std::vector<TensorToWrite> tensors = {{"model.layers.0.mlp.up_proj.weight", {2, 3}, a.data(), t},
                                                {"model.norm.weight", {2}, b.data(), t}};
    if (!write_safetensors(path, tensors).ok()) continue;
    std::ifstream in(path, std::ios::binary);
    out.emplace_back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  std::remove(path.c_str());
  return out;
}

std::vector<std::string> dictionary() {
  return {"\"dtype\"", "\"shape\"", "\"data_offsets\"", "\"F32\"", "\"BF16\"", "\"F16\"", "\"I64\"", "\"__metadata__\"",
          "[0,0]", "[18446744073709551615]", "{", "}", ":", ",", "-1", "1e308"};
}

}  // namespace flashserve::fuzz
