// A bounds-checked reader (and a small writer, for tests) of GGUF, llama.cpp's model file:
//
//   "GGUF" | version u32 (2 or 3) | tensor_count u64 | kv_count u64
//   kv_count × (key: string | value type u32 | value)        metadata
//   tensor_count × (name: string | n_dims u32 | ne[n_dims] u64 | ggml type u32 | offset u64)
//   padding to general.alignment (u32, default 32) | tensor data (each tensor at data + offset)
//
// All little-endian; a string is a u64 byte length and the bytes (no NUL); an array is an
// element type u32, a u64 count and the elements. ne is innermost first: ne[0] is the row length
// (a [out, in] Linear weight is listed as ne = {in, out}). Quantized rows are whole blocks.
//
// The file is memory-mapped and validated once in open(): a truncated file, a bad magic or
// version, an unknown value or tensor type, a string or array longer than the file, a shape with
// more than 4 dims, a zero or overflowing dimension, a tensor whose offset is unaligned or whose
// bytes lie past the end or overlap another's, duplicate keys or names: each is an error naming
// what is wrong and where (byte offset), never a crash or a read out of bounds. After that the
// getters only read what was checked.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "server/model/ggml_quants.h"

namespace flashserve::model {

enum class GgufValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6, kBool = 7,
  kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};
// "UINT32", "ARRAY", ...; "type N" for an unknown id.
std::string gguf_value_type_name(uint32_t type);
// Bytes of one value of a fixed-size type; 0 for STRING, ARRAY and unknown ids.
uint64_t gguf_value_type_size(uint32_t type);

// One metadata entry, as located in the file.
struct GgufKV {
  std::string key;
  GgufValueType type = GgufValueType::kUint8;
  GgufValueType array_type = GgufValueType::kUint8;  // element type (arrays only)
  uint64_t count = 1;   // array elements; 1 for a scalar
  uint64_t offset = 0;  // file offset of the value (a string's length field; an array's first element)
  uint64_t bytes = 0;   // bytes from offset to the end of the value
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> dims;  // ne, innermost first, 1 to 4 entries, each >= 1
  uint64_t offset = 0;        // from the start of the data section, a multiple of the alignment
  uint64_t bytes = 0;         // numel / block_elems · block_bytes
  int64_t numel() const;
  // Outermost first (PyTorch's order): dims reversed. {in, out} -> {out, in}.
  std::vector<int64_t> shape() const;
};

class GgufFile {
 public:
  // Maps the file read-only and validates it all.
  static Status open(const std::string& path, GgufFile* out);
  // Validates an in-memory file (tests, fuzzing); `name` appears in error messages.
  static Status parse(std::vector<uint8_t> bytes, const std::string& name, GgufFile* out);

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // where the data section starts
  uint64_t file_size() const;

  // Metadata in file order; find() gives null for an absent key.
  const std::vector<GgufKV>& metadata() const { return kvs_; }
  const GgufKV* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters. An absent key is INVALID_ARGUMENT "no metadata key K"; a value of another type
  // is INVALID_ARGUMENT naming the key, its type and the wanted one. The integer getters take any
  // integer type (UINT8..INT64) whose value fits the target, and refuse one that does not fit
  // (a negative id read as unsigned); the float getters take FLOAT32 or FLOAT64; get_bool takes
  // BOOL only, get_string STRING only.
  Status get_bool(std::string_view key, bool* out) const;
  Status get_u32(std::string_view key, uint32_t* out) const;
  Status get_i32(std::string_view key, int32_t* out) const;
  Status get_u64(std::string_view key, uint64_t* out) const;
  Status get_i64(std::string_view key, int64_t* out) const;
  Status get_f32(std::string_view key, float* out) const;
  Status get_f64(std::string_view key, double* out) const;
  Status get_string(std::string_view key, std::string* out) const;
  // The bytes inside the mapped file: valid while this GgufFile (or a copy of it) lives.
  Status get_string_view(std::string_view key, std::string_view* out) const;
  // Arrays: elements of the matching kind (strings; any integer type, range-checked; FLOAT32 or
  // FLOAT64). An ARRAY of another element type, or a scalar, is a type error.
  Status get_string_array(std::string_view key, std::vector<std::string>* out) const;
  Status get_string_array_views(std::string_view key, std::vector<std::string_view>* out) const;
  Status get_i32_array(std::string_view key, std::vector<int32_t>* out) const;
  Status get_i64_array(std::string_view key, std::vector<int64_t>* out) const;
  Status get_f32_array(std::string_view key, std::vector<float>* out) const;

  // Tensors in file order; tensor() gives null for an absent name.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* tensor(std::string_view name) const;
  bool has_tensor(std::string_view name) const { return tensor(name) != nullptr; }
  // The tensor's raw bytes (info.bytes of them) inside the mapped file.
  Status tensor_data(std::string_view name, const uint8_t** data, uint64_t* bytes) const;
  // Dequantizes tensor `name` into out as fp32 (row-major, outermost first), checking that its
  // shape, outermost first, is `shape` (a [out, in] weight: {out, in}). A type this build cannot
  // dequantize is UNSUPPORTED naming it.
  Status read_f32(std::string_view name, const std::vector<int64_t>& shape, std::vector<float>* out) const;

 private:
  struct Buffer;
  Status parse_all();
  const uint8_t* at(uint64_t offset) const;
  Status kv_of_type(std::string_view key, const GgufKV** kv) const;
  Status get_integer(std::string_view key, int64_t lo, uint64_t hi, bool want_signed, uint64_t* bits) const;
  Status get_float(std::string_view key, double* out) const;
  Status array_of(std::string_view key, const char* want, bool (*ok)(GgufValueType), const GgufKV** kv) const;

  std::shared_ptr<const Buffer> buf_;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKV> kvs_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Builds a GGUF file in memory: metadata in the order set, tensors in the order added, data
// aligned to the alignment (general.alignment is written when set_alignment() was called).
// Nothing is checked: tests use it to make bad files too.
class GgufWriter {
 public:
  void set_u8(const std::string& key, uint8_t v);
  void set_i8(const std::string& key, int8_t v);
  void set_u16(const std::string& key, uint16_t v);
  void set_i16(const std::string& key, int16_t v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_i64(const std::string& key, int64_t v);
  void set_f32(const std::string& key, float v);
  void set_f64(const std::string& key, double v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, std::string_view v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  // An array of fixed-size elements (count of them, little-endian, packed) of type `elem`.
  void set_array(const std::string& key, GgufValueType elem, const void* elems, uint64_t count);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_alignment(uint32_t alignment);

  // Raw tensor bytes of a ggml type; dims innermost first (ne).
  void add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& dims, const void* data,
                  uint64_t bytes);
  // fp32 values stored as F32, F16 or BF16; shape outermost first, as read_f32 takes it.
  void add_tensor_f32(const std::string& name, const std::vector<int64_t>& shape, const float* data,
                      GgmlType stored_as = GgmlType::kF32);

  std::vector<uint8_t> serialize(uint32_t version = 3) const;
  Status write(const std::string& path, uint32_t version = 3) const;

 private:
  void key_and_type(const std::string& key, GgufValueType type);
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;
  };
  std::vector<uint8_t> kv_bytes_;
  uint64_t kv_count_ = 0;
  uint32_t alignment_ = 32;
  std::vector<Tensor> tensors_;
};

}  // namespace flashserve::model
