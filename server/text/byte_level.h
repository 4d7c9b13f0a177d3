// GPT-2's byte-level alphabet: every byte 0..255 stands for one printable code point, so that
// a byte-level BPE vocabulary is a set of ordinary strings. Bytes that are printable Latin-1
// ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for themselves; the other 68 (control
// bytes, space, DEL, U+00A0, U+00AD) take U+0100, U+0101, ... in byte order: ' ' is 'Ġ'
// (U+0120), '\n' is 'Ċ' (U+010A).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flashserve::text {

// The code point that byte b stands for.
uint32_t byte_to_code_point(uint8_t b);
// The byte that code point cp stands for, or -1 when cp is not in the alphabet.
int code_point_to_byte(uint32_t cp);

// Raw bytes -> their byte-level string (UTF-8 of the mapped code points).
std::string bytes_to_byte_level(std::string_view bytes);
// Byte-level string -> raw bytes. False (and *out unspecified) when `token` is not valid UTF-8
// or holds a code point outside the alphabet.
bool byte_level_to_bytes(std::string_view token, std::string* out);

}  // namespace flashserve::text
