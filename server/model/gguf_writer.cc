// GgufWriter: GGUF files for tests (see gguf.h).
#include <cstring>
#include <fstream>

#include "common/dtype.h"
#include "server/model/gguf.h"

namespace flashserve::model {

namespace {
void put_le(std::vector<uint8_t>* b, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b->push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_string(std::vector<uint8_t>* b, std::string_view s) {
  put_le(b, s.size(), 8);
  b->insert(b->end(), s.begin(), s.end());
}
}  // namespace

void GgufWriter::key_and_type(const std::string& key, GgufValueType type) {
  put_string(&kv_bytes_, key);
  put_le(&kv_bytes_, static_cast<uint32_t>(type), 4);
  ++kv_count_;
}

void GgufWriter::set_u8(const std::string& k, uint8_t v) { key_and_type(k, GgufValueType::kUint8); put_le(&kv_bytes_, v, 1); }
void GgufWriter::set_i8(const std::string& k, int8_t v) { key_and_type(k, GgufValueType::kInt8); put_le(&kv_bytes_, static_cast<uint8_t>(v), 1); }
void GgufWriter::set_u16(const std::string& k, uint16_t v) { key_and_type(k, GgufValueType::kUint16); put_le(&kv_bytes_, v, 2); }
void GgufWriter::set_i16(const std::string& k, int16_t v) { key_and_type(k, GgufValueType::kInt16); put_le(&kv_bytes_, static_cast<uint16_t>(v), 2); }
void GgufWriter::set_u32(const std::string& k, uint32_t v) { key_and_type(k, GgufValueType::kUint32); put_le(&kv_bytes_, v, 4); }
void GgufWriter::set_i32(const std::string& k, int32_t v) { key_and_type(k, GgufValueType::kInt32); put_le(&kv_bytes_, static_cast<uint32_t>(v), 4); }
void GgufWriter::set_u64(const std::string& k, uint64_t v) { key_and_type(k, GgufValueType::kUint64); put_le(&kv_bytes_, v, 8); }
void GgufWriter::set_i64(const std::string& k, int64_t v) { key_and_type(k, GgufValueType::kInt64); put_le(&kv_bytes_, static_cast<uint64_t>(v), 8); }
void GgufWriter::set_f32(const std::string& k, float v) { key_and_type(k, GgufValueType::kFloat32); put_le(&kv_bytes_, float_bits(v), 4); }
void GgufWriter::set_f64(const std::string& k, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  key_and_type(k, GgufValueType::kFloat64);
  put_le(&kv_bytes_, bits, 8);
}
void GgufWriter::set_bool(const std::string& k, bool v) { key_and_type(k, GgufValueType::kBool); put_le(&kv_bytes_, v ? 1 : 0, 1); }
void GgufWriter::set_string(const std::string& k, std::string_view v) { key_and_type(k, GgufValueType::kString); put_string(&kv_bytes_, v); }

void GgufWriter::set_string_array(const std::string& k, const std::vector<std::string>& v) {
  key_and_type(k, GgufValueType::kArray);
  put_le(&kv_bytes_, static_cast<uint32_t>(GgufValueType::kString), 4);
  put_le(&kv_bytes_, v.size(), 8);
  for (const auto& s : v) put_string(&kv_bytes_, s);
}

void GgufWriter::set_array(const std::string& k, GgufValueType elem, const void* elems, uint64_t count) {
  key_and_type(k, GgufValueType::kArray);
  put_le(&kv_bytes_, static_cast<uint32_t>(elem), 4);
  put_le(&kv_bytes_, count, 8);
  const auto* p = static_cast<const uint8_t*>(elems);
  kv_bytes_.insert(kv_bytes_.end(), p, p + count * gguf_value_type_size(static_cast<uint32_t>(elem)));
}
void GgufWriter::set_i32_array(const std::string& k, const std::vector<int32_t>& v) {
  set_array(k, GgufValueType::kInt32, v.data(), v.size());
}
void GgufWriter::set_f32_array(const std::string& k, const std::vector<float>& v) {
  set_array(k, GgufValueType::kFloat32, v.data(), v.size());
}
void GgufWriter::set_alignment(uint32_t alignment) {
  alignment_ = alignment;
  set_u32("general.alignment", alignment);
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& dims, const void* data,
                            uint64_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  tensors_.push_back({name, static_cast<uint32_t>(type), dims, std::vector<uint8_t>(p, p + bytes)});
}

void GgufWriter::add_tensor_f32(const std::string& name, const std::vector<int64_t>& shape, const float* data,
                                GgmlType stored_as) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<uint8_t> bytes;
  for (int64_t i = 0; i < n; ++i) {
    if (stored_as == GgmlType::kF16) put_le(&bytes, float_to_fp16(data[i]), 2);
    else if (stored_as == GgmlType::kBF16) put_le(&bytes, float_to_bf16(data[i]), 2);
    else put_le(&bytes, float_bits(data[i]), 4);
  }
  add_tensor(name, stored_as, std::vector<int64_t>(shape.rbegin(), shape.rend()), bytes.data(), bytes.size());
}

std::vector<uint8_t> GgufWriter::serialize(uint32_t version) const {
  const uint64_t a = alignment_ ? alignment_ : 1;
  auto pad = [a](uint64_t x) { return (x + a - 1) / a * a; };
  std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
  put_le(&b, version, 4);
  put_le(&b, tensors_.size(), 8);
  put_le(&b, kv_count_, 8);
  b.insert(b.end(), kv_bytes_.begin(), kv_bytes_.end());
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(&b, t.name);
    put_le(&b, t.dims.size(), 4);
    for (int64_t d : t.dims) put_le(&b, static_cast<uint64_t>(d), 8);
    put_le(&b, t.type, 4);
    put_le(&b, offset, 8);
    offset = pad(offset + t.data.size());
  }
  if (!tensors_.empty()) {
    b.resize(pad(b.size()), 0);
    const uint64_t data_start = b.size();
    for (const Tensor& t : tensors_) {
      b.insert(b.end(), t.data.begin(), t.data.end());
      if (&t != &tensors_.back()) b.resize(data_start + pad(b.size() - data_start), 0);
    }
  }
  return b;
}

Status GgufWriter::write(const std::string& path, uint32_t version) const {
  const std::vector<uint8_t> b = serialize(version);
  std::ofstream f(path, std::ios::binary);
  if (!f) return invalid_argument("gguf writer: cannot create " + path);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  return f ? Status::Ok() : internal_error("gguf writer: write failed for " + path);
}

}  // namespace flashserve::model
