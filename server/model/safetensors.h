// A bounds-checked reader (and a small writer, for tests) of the safetensors format: an
// 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape and
// [begin, end) byte range in the data that follows. A truncated file, a lying header
// (offsets past the end, sizes that disagree with the shape, overlapping tensors), or an
// unknown dtype is an error with a message, never a crash or an out-of-bounds read.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"

namespace flashserve::model {

struct TensorInfo {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;  // byte range in the data section
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  static Status open(const std::string& path, SafetensorsFile* out);
  // Parses an in-memory file (what open() reads).
  static Status parse(std::vector<char> bytes, const std::string& name, SafetensorsFile* out);

  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // Copies tensor `name` into out as fp32, checking its shape.
  Status read_f32(const std::string& name, const std::vector<int64_t>& shape, std::vector<float>* out) const;

 private:
  std::string name_;
  std::vector<char> bytes_;
  int64_t data_offset_ = 0;
  std::map<std::string, TensorInfo> tensors_;
};

// Writes tensors (fp32 values, stored as `dtype`) to a safetensors file.
struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
  DType dtype = DType::kFloat32;
};
Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors);

}  // namespace flashserve::model
