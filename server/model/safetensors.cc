#include "server/model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace flashserve::model {

namespace {

bool parse_dtype(const std::string& s, DType* t) {
  if (s == "F32") *t = DType::kFloat32;
  else if (s == "F16") *t = DType::kFloat16;
  else if (s == "BF16") *t = DType::kBFloat16;
  else return false;
  return true;
}

const char* dtype_tag(DType t) {
  switch (t) {
    case DType::kFloat32: return "F32";
    case DType::kFloat16: return "F16";
    case DType::kBFloat16: return "BF16";
    case DType::kFp8E4M3: return "F8_E4M3";
    case DType::kFp8E5M2: return "F8_E5M2";
  }
  return "F32";
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Status SafetensorsFile::open(const std::string& path, SafetensorsFile* out) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return invalid_argument("safetensors: cannot open " + path);
  const std::streamsize size = f.tellg();
  if (size < 0) return invalid_argument("safetensors: cannot read " + path);
  std::vector<char> bytes(static_cast<size_t>(size));
  f.seekg(0);
  if (size > 0 && !f.read(bytes.data(), size)) return invalid_argument("safetensors: short read of " + path);
  return parse(std::move(bytes), path, out);
}

Status SafetensorsFile::parse(std::vector<char> bytes, const std::string& name, SafetensorsFile* out) {
  const std::string where = "safetensors " + name + ": ";
  if (bytes.size() < 8) return invalid_argument(where + "shorter than its 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[i]);
  if (header_len > bytes.size() - 8 || header_len > (uint64_t{1} << 30))
    return invalid_argument(where + "header length " + std::to_string(header_len) + " exceeds the file (" +
                            std::to_string(bytes.size()) + " bytes)");
  const int64_t data_offset = 8 + static_cast<int64_t>(header_len);
  const int64_t data_size = static_cast<int64_t>(bytes.size()) - data_offset;
  nlohmann::json header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + data_offset, nullptr, false);
  if (header.is_discarded() || !header.is_object()) return invalid_argument(where + "the header is not a JSON object");
  SafetensorsFile f;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& v = it.value();
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets") ||
        !v["dtype"].is_string() || !v["shape"].is_array() || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      return invalid_argument(where + "tensor " + it.key() + " lacks dtype, shape or data_offsets");
    TensorInfo t;
    if (!parse_dtype(v["dtype"].get<std::string>(), &t.dtype))
      return invalid_argument(where + "tensor " + it.key() + " has unsupported dtype " + v["dtype"].get<std::string>());
    for (const auto& d : v["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (int64_t{1} << 40))
        return invalid_argument(where + "tensor " + it.key() + " has a bad shape");
      t.shape.push_back(d.get<int64_t>());
    }
    if (!v["data_offsets"][0].is_number_integer() || !v["data_offsets"][1].is_number_integer())
      return invalid_argument(where + "tensor " + it.key() + " has bad data_offsets");
    t.begin = v["data_offsets"][0].get<int64_t>();
    t.end = v["data_offsets"][1].get<int64_t>();
    if (t.begin < 0 || t.end < t.begin || t.end > data_size)
      return invalid_argument(where + "tensor " + it.key() + " has data [" + std::to_string(t.begin) + ", " +
                              std::to_string(t.end) + ") outside the " + std::to_string(data_size) + "-byte data");
    if (t.end - t.begin != t.numel() * dtype_size(t.dtype))
      return invalid_argument(where + "tensor " + it.key() + " holds " + std::to_string(t.end - t.begin) +
                              " bytes but its shape " + shape_str(t.shape) + " needs " +
                              std::to_string(t.numel() * dtype_size(t.dtype)));
    ranges.push_back({t.begin, t.end});
    f.tensors_[it.key()] = t;
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) return invalid_argument(where + "tensors overlap");
  f.name_ = name;
  f.data_offset_ = data_offset;
  f.bytes_ = std::move(bytes);
  *out = std::move(f);
  return Status::Ok();
}

Status SafetensorsFile::read_f32(const std::string& name, const std::vector<int64_t>& shape,
                                 std::vector<float>* out) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return invalid_argument("safetensors " + name_ + ": no tensor " + name);
  const TensorInfo& t = it->second;
  if (t.shape != shape)
    return invalid_argument("safetensors " + name_ + ": tensor " + name + " has shape " + shape_str(t.shape) +
                            ", expected " + shape_str(shape));
  out->resize(static_cast<size_t>(t.numel()));
  const char* src = bytes_.data() + data_offset_ + t.begin;
  if (t.dtype == DType::kFloat32) {
    std::memcpy(out->data(), src, static_cast<size_t>(t.end - t.begin));
  } else {
    std::vector<uint16_t> tmp(static_cast<size_t>(t.numel()));
    std::memcpy(tmp.data(), src, static_cast<size_t>(t.end - t.begin));
    convert_to_float(tmp.data(), t.dtype, t.numel(), out->data());
  }
  return Status::Ok();
}

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  int64_t offset = 0;
  std::vector<std::vector<char>> blobs;
  for (const auto& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    std::vector<char> blob(static_cast<size_t>(n * dtype_size(t.dtype)));
    convert_from_float(t.data, t.dtype, n, blob.data());
    header[t.name] = {{"dtype", dtype_tag(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + n * dtype_size(t.dtype)}}};
    offset += static_cast<int64_t>(blob.size());
    blobs.push_back(std::move(blob));
  }
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';
  std::ofstream f(path, std::ios::binary);
  if (!f) return invalid_argument("write_safetensors: cannot create " + path);
  uint64_t len = h.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>((len >> (8 * i)) & 0xff));
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& b : blobs) f.write(b.data(), static_cast<std::streamsize>(b.size()));
  return f ? Status::Ok() : internal_error("write_safetensors: write failed for " + path);
}

}  // namespace flashserve::model
