#include "server/text/byte_level.h"

#include <array>

#include "server/text/utf8.h"

namespace flashserve::text {
namespace {

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> from_cp{};  // every mapped code point is below U+0144
  Tables() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t byte_to_code_point(uint8_t b) { return tables().to_cp[b]; }

int code_point_to_byte(uint32_t cp) { return cp < 512 ? tables().from_cp[cp] : -1; }

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(byte_to_code_point(static_cast<uint8_t>(c)), &out);
  return out;
}

bool byte_level_to_bytes(std::string_view token, std::string* out) {
  out->clear();
  if (!utf8_is_valid(token)) return false;
  size_t pos = 0;
  while (pos < token.size()) {
    const int b = code_point_to_byte(next_code_point(token, &pos));
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
  }
  return true;
}

}  // namespace flashserve::text
