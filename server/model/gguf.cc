#include "server/model/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "common/dtype.h"
#include "common/thread_pool.h"

namespace flashserve::model {

// The file's bytes: a read-only mapping, or a vector (parse()).
struct GgufFile::Buffer {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  void* mapping = nullptr;  // munmap'd on destruction
  std::vector<uint8_t> owned;
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (mapping) munmap(mapping, static_cast<size_t>(size));
  }
};

uint64_t gguf_value_type_size(uint32_t t) {
  switch (static_cast<GgufValueType>(t)) {
    case GgufValueType::kUint8: case GgufValueType::kInt8: case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16: case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32: case GgufValueType::kInt32: case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64: case GgufValueType::kInt64: case GgufValueType::kFloat64: return 8;
    default: return 0;
  }
}

namespace {

constexpr uint64_t kMaxDims = 4;

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

bool is_integer(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: case GgufValueType::kInt8: case GgufValueType::kUint16: case GgufValueType::kInt16:
    case GgufValueType::kUint32: case GgufValueType::kInt32: case GgufValueType::kUint64: case GgufValueType::kInt64:
      return true;
    default:
      return false;
  }
}
bool is_float(GgufValueType t) { return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64; }
bool is_string(GgufValueType t) { return t == GgufValueType::kString; }

bool is_signed(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 || t == GgufValueType::kInt32 ||
         t == GgufValueType::kInt64;
}

uint64_t load_le(const uint8_t* p, uint64_t n) {
  uint64_t v = 0;
  for (uint64_t i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

// An integer element of type t at p, as its 64 bits (sign-extended when signed).
uint64_t load_integer(const uint8_t* p, GgufValueType t) {
  const uint64_t n = gguf_value_type_size(static_cast<uint32_t>(t));
  uint64_t v = load_le(p, n);
  if (is_signed(t) && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);
  return v;
}

double load_float(const uint8_t* p, GgufValueType t) {
  if (t == GgufValueType::kFloat32) return bits_float(static_cast<uint32_t>(load_le(p, 4)));
  const uint64_t bits = load_le(p, 8);
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

// Whether integer bits (of a value of type t) fit [lo, hi].
bool fits(uint64_t bits, GgufValueType t, int64_t lo, uint64_t hi) {
  if (is_signed(t)) {
    const int64_t v = static_cast<int64_t>(bits);
    return v >= lo && (v < 0 || static_cast<uint64_t>(v) <= hi);
  }
  return bits <= hi;
}

// Reads the file front to back; every read checks the bytes left first.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& where) : data_(data), size_(size), where_(where) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  Status need(uint64_t n, const std::string& what) const {
    if (n > left())
      return invalid_argument(where_ + "truncated: " + what + " at offset " + std::to_string(pos_) + " needs " +
                              std::to_string(n) + " bytes, the file has " + std::to_string(left()) + " left");
    return Status::Ok();
  }
  Status skip(uint64_t n, const std::string& what) {
    FS_RETURN_IF_ERROR(need(n, what));
    pos_ += n;
    return Status::Ok();
  }
  Status u32(uint32_t* v, const std::string& what) {
    FS_RETURN_IF_ERROR(need(4, what));
    *v = static_cast<uint32_t>(load_le(data_ + pos_, 4));
    pos_ += 4;
    return Status::Ok();
  }
  Status u64(uint64_t* v, const std::string& what) {
    FS_RETURN_IF_ERROR(need(8, what));
    *v = load_le(data_ + pos_, 8);
    pos_ += 8;
    return Status::Ok();
  }
  Status string(std::string_view* s, const std::string& what) {
    const uint64_t at = pos_;
    uint64_t len = 0;
    FS_RETURN_IF_ERROR(u64(&len, "the length of " + what));
    if (len > left())
      return invalid_argument(where_ + what + " at offset " + std::to_string(at) + " claims " + std::to_string(len) +
                              " bytes, past the end of the file (" + std::to_string(left()) + " left)");
    *s = std::string_view(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return Status::Ok();
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& where_;
};

}  // namespace

std::string gguf_value_type_name(uint32_t type) {
  static const char* const kNames[] = {"UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",  "FLOAT32",
                                       "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64"};
  if (known_value_type(type)) return kNames[type];
  return "type " + std::to_string(type);
}

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> GgufTensorInfo::shape() const { return std::vector<int64_t>(dims.rbegin(), dims.rend()); }

uint64_t GgufFile::file_size() const { return buf_ ? buf_->size : 0; }
const uint8_t* GgufFile::at(uint64_t offset) const { return buf_->data + offset; }

Status GgufFile::open(const std::string& path, GgufFile* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return invalid_argument("gguf: cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument("gguf: " + path + " is not a regular file");
  }
  auto buf = std::make_shared<Buffer>();
  buf->size = static_cast<uint64_t>(st.st_size);
  if (buf->size > 0) {
    void* p = mmap(nullptr, static_cast<size_t>(buf->size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return invalid_argument("gguf: cannot map " + path + ": " + std::strerror(err));
    }
    buf->mapping = p;
    buf->data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping stays valid
  GgufFile f;
  f.buf_ = std::move(buf);
  f.name_ = path;
  FS_RETURN_IF_ERROR(f.parse_all());
  *out = std::move(f);
  return Status::Ok();
}

Status GgufFile::parse(std::vector<uint8_t> bytes, const std::string& name, GgufFile* out) {
  auto buf = std::make_shared<Buffer>();
  buf->owned = std::move(bytes);
  buf->data = buf->owned.data();
  buf->size = buf->owned.size();
  GgufFile f;
  f.buf_ = std::move(buf);
  f.name_ = name;
  FS_RETURN_IF_ERROR(f.parse_all());
  *out = std::move(f);
  return Status::Ok();
}

Status GgufFile::parse_all() {
  const std::string where = "gguf " + name_ + ": ";
  Cursor c(buf_->data, buf_->size, where);
  if (buf_->size < 4 || std::memcmp(buf_->data, "GGUF", 4) != 0) {
    std::string magic;
    for (uint64_t i = 0; i < std::min<uint64_t>(4, buf_->size); ++i) {
      const char ch = static_cast<char>(buf_->data[i]);
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", buf_->data[i]);
      magic += (ch >= 0x20 && ch < 0x7f) ? std::string(1, ch) : std::string(hex);
    }
    return invalid_argument(where + "bad magic '" + magic + "' (a GGUF file starts with 'GGUF')");
  }
  FS_RETURN_IF_ERROR(c.skip(4, "the magic"));
  FS_RETURN_IF_ERROR(c.u32(&version_, "the version"));
  if (version_ == 1) return unsupported(where + "GGUF version 1 (32-bit lengths) is not supported; version 2 and 3 are");
  if (version_ != 2 && version_ != 3) {
    if ((version_ & 0xffff) == 0 && (version_ >> 24) >= 1 && (version_ >> 24) <= 3)
      return unsupported(where + "a big-endian GGUF file (version bytes " + std::to_string(version_) +
                         ") is not supported");
    return invalid_argument(where + "unknown GGUF version " + std::to_string(version_) + " (2 and 3 are read)");
  }
  uint64_t tensor_count = 0, kv_count = 0;
  FS_RETURN_IF_ERROR(c.u64(&tensor_count, "the tensor count"));
  FS_RETURN_IF_ERROR(c.u64(&kv_count, "the metadata count"));
  // Counts are not trusted: room is reserved for at most what the bytes left could hold (a
  // key-value pair takes at least 13 of them, a tensor info 32); an error past that many entries
  // says that the count itself is impossible.
  auto count_note = [&](Status st, uint64_t count, uint64_t left, uint64_t min_bytes, const char* what) -> Status {
    if (st.ok() || count <= left / min_bytes) return st;
    return Status(st.code(), st.message() + " (the header's " + what + " count " + std::to_string(count) +
                                 " is more than the " + std::to_string(left) + " bytes after it could hold)");
  };
  const uint64_t left_for_kvs = c.left();
  auto read_kvs = [&]() -> Status {
    kvs_.reserve(static_cast<size_t>(std::min(kv_count, c.left() / 13)));
    for (uint64_t i = 0; i < kv_count; ++i) {
      const std::string entry = "metadata entry " + std::to_string(i) + " of " + std::to_string(kv_count);
      std::string_view key;
      FS_RETURN_IF_ERROR(c.string(&key, "the key of " + entry));
      GgufKV kv;
      kv.key = std::string(key);
      const std::string what = "metadata key '" + kv.key + "'";
      uint32_t type = 0;
      FS_RETURN_IF_ERROR(c.u32(&type, "the value type of " + what));
      if (!known_value_type(type)) return invalid_argument(where + what + " has unknown value type " + std::to_string(type));
      kv.type = static_cast<GgufValueType>(type);
      if (kv.type == GgufValueType::kArray) {
        uint32_t elem = 0;
        FS_RETURN_IF_ERROR(c.u32(&elem, "the element type of " + what));
        if (!known_value_type(elem))
          return invalid_argument(where + what + " is an array of unknown element type " + std::to_string(elem));
        if (static_cast<GgufValueType>(elem) == GgufValueType::kArray)
          return unsupported(where + what + " is an array of arrays (not supported)");
        kv.array_type = static_cast<GgufValueType>(elem);
        FS_RETURN_IF_ERROR(c.u64(&kv.count, "the length of " + what));
        kv.offset = c.pos();
        const uint64_t size = gguf_value_type_size(elem);
        if (size > 0) {
          if (kv.count > c.left() / size)
            return invalid_argument(where + what + " claims " + std::to_string(kv.count) + " " +
                                    gguf_value_type_name(elem) + " elements, past the end of the file (" +
                                    std::to_string(c.left()) + " bytes left)");
          FS_RETURN_IF_ERROR(c.skip(kv.count * size, "the elements of " + what));
        } else {  // strings: at least 8 bytes each
          if (kv.count > c.left() / 8)
            return invalid_argument(where + what + " claims " + std::to_string(kv.count) +
                                    " strings, past the end of the file (" + std::to_string(c.left()) + " bytes left)");
          for (uint64_t j = 0; j < kv.count; ++j) {
            std::string_view s;
            FS_RETURN_IF_ERROR(c.string(&s, "string " + std::to_string(j) + " of " + what));
          }
        }
      } else {
        kv.offset = c.pos();
        if (kv.type == GgufValueType::kString) {
          std::string_view s;
          FS_RETURN_IF_ERROR(c.string(&s, "the value of " + what));
        } else {
          FS_RETURN_IF_ERROR(c.skip(gguf_value_type_size(type), "the value of " + what));
          if (kv.type == GgufValueType::kBool && buf_->data[kv.offset] > 1)
            return invalid_argument(where + what + " is a BOOL holding " + std::to_string(buf_->data[kv.offset]));
        }
      }
      kv.bytes = c.pos() - kv.offset;
      if (!kv_index_.emplace(kv.key, kvs_.size()).second)
        return invalid_argument(where + what + " appears twice");
      kvs_.push_back(std::move(kv));
    }
    return Status::Ok();
  };
  FS_RETURN_IF_ERROR(count_note(read_kvs(), kv_count, left_for_kvs, 13, "metadata"));

  alignment_ = 32;
  if (const GgufKV* a = find("general.alignment")) {
    if (a->type != GgufValueType::kUint32)
      return invalid_argument(where + "general.alignment is " + gguf_value_type_name(static_cast<uint32_t>(a->type)) +
                              ", not UINT32");
    alignment_ = load_le(at(a->offset), 4);
    if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
      return invalid_argument(where + "general.alignment " + std::to_string(alignment_) + " is not a power of two");
  }

  const uint64_t left_for_tensors = c.left();
  auto read_tensor_infos = [&]() -> Status {
    tensors_.reserve(static_cast<size_t>(std::min(tensor_count, c.left() / 32)));
    for (uint64_t i = 0; i < tensor_count; ++i) {
      std::string_view name;
      FS_RETURN_IF_ERROR(c.string(&name, "the name of tensor info " + std::to_string(i) + " of " + std::to_string(tensor_count)));
      GgufTensorInfo t;
      t.name = std::string(name);
      const std::string what = "tensor '" + t.name + "'";
      uint32_t n_dims = 0;
      FS_RETURN_IF_ERROR(c.u32(&n_dims, "the dimension count of " + what));
      if (n_dims == 0 || n_dims > kMaxDims)
        return invalid_argument(where + what + " has " + std::to_string(n_dims) + " dims (1 to 4 are allowed)");
      uint64_t numel = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        uint64_t ne = 0;
        FS_RETURN_IF_ERROR(c.u64(&ne, "dimension " + std::to_string(d) + " of " + what));
        if (ne == 0) return invalid_argument(where + what + " has a zero-size dimension " + std::to_string(d));
        if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
            numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne)
          return invalid_argument(where + what + "'s shape overflows (dimension " + std::to_string(d) + " is " +
                                  std::to_string(ne) + ")");
        numel *= ne;
        t.dims.push_back(static_cast<int64_t>(ne));
      }
      uint32_t type = 0;
      FS_RETURN_IF_ERROR(c.u32(&type, "the ggml type of " + what));
      const GgmlTypeTraits traits = ggml_type_traits(type);
      if (traits.name == nullptr) return invalid_argument(where + what + " has unknown ggml type " + std::to_string(type));
      t.type = static_cast<GgmlType>(type);
      if (t.dims[0] % traits.block_elems != 0)
        return invalid_argument(where + what + " (" + traits.name + ") has rows of " + std::to_string(t.dims[0]) +
                                " elements, not a multiple of its block of " + std::to_string(traits.block_elems));
      const uint64_t blocks = numel / static_cast<uint64_t>(traits.block_elems);
      if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(traits.block_bytes))
        return invalid_argument(where + what + "'s byte size overflows");
      t.bytes = blocks * static_cast<uint64_t>(traits.block_bytes);
      FS_RETURN_IF_ERROR(c.u64(&t.offset, "the data offset of " + what));
      if (t.offset % alignment_ != 0)
        return invalid_argument(where + what + " has data offset " + std::to_string(t.offset) +
                                ", not a multiple of the alignment " + std::to_string(alignment_));
      if (!tensor_index_.emplace(t.name, tensors_.size()).second)
        return invalid_argument(where + what + " appears twice");
      tensors_.push_back(std::move(t));
    }
    return Status::Ok();
  };
  FS_RETURN_IF_ERROR(count_note(read_tensor_infos(), tensor_count, left_for_tensors, 32, "tensor"));

  // The data section starts at the next multiple of the alignment.
  const uint64_t end_of_infos = c.pos();
  data_offset_ = end_of_infos + (alignment_ - end_of_infos % alignment_) % alignment_;
  if (tensors_.empty()) return Status::Ok();
  if (data_offset_ > buf_->size)
    return invalid_argument(where + "truncated: the data section would start at offset " + std::to_string(data_offset_) +
                            ", past the end of the file (" + std::to_string(buf_->size) + " bytes)");
  const uint64_t data_size = buf_->size - data_offset_;
  std::vector<std::pair<uint64_t, size_t>> order;
  order.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const GgufTensorInfo& t = tensors_[i];
    if (t.offset > data_size || t.bytes > data_size - t.offset)
      return invalid_argument(where + "tensor '" + t.name + "' has data [" + std::to_string(t.offset) + ", +" +
                              std::to_string(t.bytes) + ") past the end of the " + std::to_string(data_size) +
                              "-byte data section");
    order.push_back({t.offset, i});
  }
  std::sort(order.begin(), order.end());
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensorInfo& prev = tensors_[order[i - 1].second];
    if (order[i].first < prev.offset + prev.bytes)
      return invalid_argument(where + "tensor '" + tensors_[order[i].second].name + "' overlaps tensor '" + prev.name +
                              "'");
  }
  return Status::Ok();
}

const GgufKV* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second];
}

const GgufTensorInfo* GgufFile::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Status GgufFile::kv_of_type(std::string_view key, const GgufKV** kv) const {
  *kv = find(key);
  if (*kv == nullptr) return invalid_argument("gguf " + name_ + ": no metadata key " + std::string(key));
  return Status::Ok();
}

namespace {
std::string type_of(const GgufKV& kv) {
  if (kv.type == GgufValueType::kArray) return "ARRAY of " + gguf_value_type_name(static_cast<uint32_t>(kv.array_type));
  return gguf_value_type_name(static_cast<uint32_t>(kv.type));
}
}  // namespace

Status GgufFile::get_integer(std::string_view key, int64_t lo, uint64_t hi, bool want_signed, uint64_t* bits) const {
  const GgufKV* kv;
  FS_RETURN_IF_ERROR(kv_of_type(key, &kv));
  if (!is_integer(kv->type))
    return invalid_argument("gguf " + name_ + ": metadata key " + kv->key + " is " + type_of(*kv) + ", not an integer");
  *bits = load_integer(at(kv->offset), kv->type);
  if (!fits(*bits, kv->type, lo, hi)) {
    const std::string value = is_signed(kv->type) ? std::to_string(static_cast<int64_t>(*bits)) : std::to_string(*bits);
    return invalid_argument("gguf " + name_ + ": metadata key " + kv->key + " = " + value + " does not fit " +
                            (want_signed ? "a signed " : "an unsigned ") + "integer up to " + std::to_string(hi));
  }
  return Status::Ok();
}

Status GgufFile::get_u32(std::string_view key, uint32_t* out) const {
  uint64_t b;
  FS_RETURN_IF_ERROR(get_integer(key, 0, std::numeric_limits<uint32_t>::max(), false, &b));
  *out = static_cast<uint32_t>(b);
  return Status::Ok();
}
Status GgufFile::get_i32(std::string_view key, int32_t* out) const {
  uint64_t b;
  FS_RETURN_IF_ERROR(get_integer(key, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), true, &b));
  *out = static_cast<int32_t>(static_cast<int64_t>(b));
  return Status::Ok();
}
Status GgufFile::get_u64(std::string_view key, uint64_t* out) const {
  return get_integer(key, 0, std::numeric_limits<uint64_t>::max(), false, out);
}
Status GgufFile::get_i64(std::string_view key, int64_t* out) const {
  uint64_t b;
  FS_RETURN_IF_ERROR(get_integer(key, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), true, &b));
  *out = static_cast<int64_t>(b);
  return Status::Ok();
}

Status GgufFile::get_float(std::string_view key, double* out) const {
  const GgufKV* kv;
  FS_RETURN_IF_ERROR(kv_of_type(key, &kv));
  if (!is_float(kv->type))
    return invalid_argument("gguf " + name_ + ": metadata key " + kv->key + " is " + type_of(*kv) + ", not a float");
  *out = load_float(at(kv->offset), kv->type);
  return Status::Ok();
}
Status GgufFile::get_f32(std::string_view key, float* out) const {
  double d;
  FS_RETURN_IF_ERROR(get_float(key, &d));
  *out = static_cast<float>(d);
  return Status::Ok();
}
Status GgufFile::get_f64(std::string_view key, double* out) const { return get_float(key, out); }

Status GgufFile::get_bool(std::string_view key, bool* out) const {
  const GgufKV* kv;
  FS_RETURN_IF_ERROR(kv_of_type(key, &kv));
  if (kv->type != GgufValueType::kBool)
    return invalid_argument("gguf " + name_ + ": metadata key " + kv->key + " is " + type_of(*kv) + ", not BOOL");
  *out = *at(kv->offset) != 0;
  return Status::Ok();
}

Status GgufFile::get_string_view(std::string_view key, std::string_view* out) const {
  const GgufKV* kv;
  FS_RETURN_IF_ERROR(kv_of_type(key, &kv));
  if (kv->type != GgufValueType::kString)
    return invalid_argument("gguf " + name_ + ": metadata key " + kv->key + " is " + type_of(*kv) + ", not STRING");
  *out = std::string_view(reinterpret_cast<const char*>(at(kv->offset + 8)), static_cast<size_t>(kv->bytes - 8));
  return Status::Ok();
}
Status GgufFile::get_string(std::string_view key, std::string* out) const {
  std::string_view v;
  FS_RETURN_IF_ERROR(get_string_view(key, &v));
  out->assign(v);
  return Status::Ok();
}

Status GgufFile::array_of(std::string_view key, const char* want, bool (*ok)(GgufValueType), const GgufKV** kv) const {
  FS_RETURN_IF_ERROR(kv_of_type(key, kv));
  if ((*kv)->type != GgufValueType::kArray || !ok((*kv)->array_type))
    return invalid_argument("gguf " + name_ + ": metadata key " + (*kv)->key + " is " + type_of(**kv) +
                            ", not an ARRAY of " + want);
  return Status::Ok();
}

Status GgufFile::get_string_array_views(std::string_view key, std::vector<std::string_view>* out) const {
  const GgufKV* kv;
  FS_RETURN_IF_ERROR(array_of(key, "STRING", is_string, &kv));
  out->clear();
  out->reserve(static_cast<size_t>(kv->count));
  uint64_t pos = kv->offset;  // every length and string was checked by parse_all
  for (uint64_t i = 0; i < kv->count; ++i) {
    const uint64_t len = load_le(at(pos), 8);
    out->emplace_back(reinterpret_cast<const char*>(at(pos + 8)), static_cast<size_t>(len));
    pos += 8 + len;
  }
  return Status::Ok();
}

Status GgufFile::get_string_array(std::string_view key, std::vector<std::string>* out) const {
  std::vector<std::string_view> views;
  FS_RETURN_IF_ERROR(get_string_array_views(key, &views));
  out->assign(views.begin(), views.end());
  return Status::Ok();
}

namespace {
template <typename T>
Status integer_array(const GgufKV& kv, const uint8_t* p, const std::string& name, std::vector<T>* out) {
  const uint64_t size = gguf_value_type_size(static_cast<uint32_t>(kv.array_type));
  out->resize(static_cast<size_t>(kv.count));
  for (uint64_t i = 0; i < kv.count; ++i) {
    const uint64_t bits = load_integer(p + i * size, kv.array_type);
    if (!fits(bits, kv.array_type, std::numeric_limits<T>::min(), static_cast<uint64_t>(std::numeric_limits<T>::max())))
      return invalid_argument("gguf " + name + ": metadata key " + kv.key + " element " + std::to_string(i) +
                              " does not fit " + std::to_string(sizeof(T) * 8) + "-bit signed integers");
    (*out)[i] = static_cast<T>(static_cast<int64_t>(bits));
  }
  return Status::Ok();
}
}  // namespace

Status GgufFile::get_i32_array(std::string_view key, std::vector<int32_t>* out) const {
  const GgufKV* kv;
  FS_RETURN_IF_ERROR(array_of(key, "integers", is_integer, &kv));
  return integer_array(*kv, at(kv->offset), name_, out);
}
Status GgufFile::get_i64_array(std::string_view key, std::vector<int64_t>* out) const {
  const GgufKV* kv;
  FS_RETURN_IF_ERROR(array_of(key, "integers", is_integer, &kv));
  return integer_array(*kv, at(kv->offset), name_, out);
}
Status GgufFile::get_f32_array(std::string_view key, std::vector<float>* out) const {
  const GgufKV* kv;
  FS_RETURN_IF_ERROR(array_of(key, "FLOAT32 or FLOAT64", is_float, &kv));
  const uint64_t size = gguf_value_type_size(static_cast<uint32_t>(kv->array_type));
  out->resize(static_cast<size_t>(kv->count));
  for (uint64_t i = 0; i < kv->count; ++i)
    (*out)[i] = static_cast<float>(load_float(at(kv->offset + i * size), kv->array_type));
  return Status::Ok();
}

Status GgufFile::tensor_data(std::string_view name, const uint8_t** data, uint64_t* bytes) const {
  const GgufTensorInfo* t = tensor(name);
  if (t == nullptr) return invalid_argument("gguf " + name_ + ": no tensor " + std::string(name));
  *data = at(data_offset_ + t->offset);
  *bytes = t->bytes;
  return Status::Ok();
}

Status GgufFile::read_f32(std::string_view name, const std::vector<int64_t>& shape, std::vector<float>* out) const {
  const GgufTensorInfo* t = tensor(name);
  if (t == nullptr) return invalid_argument("gguf " + name_ + ": no tensor " + std::string(name));
  if (t->shape() != shape)
    return invalid_argument("gguf " + name_ + ": tensor " + t->name + " has shape " + shape_str(t->shape()) +
                            " (outermost first), expected " + shape_str(shape));
  if (!ggml_can_dequantize(t->type))
    return unsupported("gguf " + name_ + ": tensor " + t->name + " has ggml type " +
                       ggml_type_name(static_cast<uint32_t>(t->type)) + ", which this build cannot dequantize");
  const GgmlTypeTraits traits = ggml_type_traits(static_cast<uint32_t>(t->type));
  const int64_t row = t->dims[0], rows = t->numel() / row;
  const int64_t row_bytes = row / traits.block_elems * traits.block_bytes;
  out->resize(static_cast<size_t>(t->numel()));
  const uint8_t* src = at(data_offset_ + t->offset);
  // Rows in chunks of about 256k elements, in parallel.
  const int64_t rows_per_chunk = std::max<int64_t>(1, (int64_t{1} << 18) / row);
  const int64_t chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  std::vector<Status> results(static_cast<size_t>(chunks));
  ThreadPool::global().parallel_for(chunks, [&](int64_t i) {
    const int64_t r0 = i * rows_per_chunk, n = std::min(rows_per_chunk, rows - r0);
    results[i] = dequantize(t->type, src + r0 * row_bytes, n * row_bytes, n * row, out->data() + r0 * row);
  });
  for (Status& s : results) FS_RETURN_IF_ERROR(s);
  return Status::Ok();
}

}  // namespace flashserve::model
