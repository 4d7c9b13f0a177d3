#include "server/grpc/caller.h"

#include <openssl/evp.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "server/grpc/server.h"

namespace flashserve::server {

namespace {

// n bytes from the kernel's CSPRNG. getrandom(2) blocks only until the pool is seeded at boot;
// where it is missing (ENOSYS in an old sandbox) std::random_device, which libstdc++ reads from
// the same pool or the CPU's RDRAND, never from a time-seeded generator.
void fill_random(unsigned char* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = getrandom(out + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r < 0 && errno != EINTR) {
      std::random_device rd;
      for (; got < n; ++got) out[got] = static_cast<unsigned char>(rd());
    }
  }
}

}  // namespace

Credentials::Credentials(const std::vector<std::string>& tokens, const std::string& admin_token) {
  for (const std::string& t : tokens) expected_.push_back("Bearer " + t);
  if (!admin_token.empty()) expected_admin_ = "Bearer " + admin_token;
}

bool Credentials::identify(const std::string_view* authorization, std::string_view peer, Caller* out) const {
  size_t match = 0;  // 1-based place of the matching token; 0: none
  bool admin = false;
  if (authorization != nullptr) {
    // No early exit: every token is compared whatever the header holds.
    for (size_t i = 0; i < expected_.size(); ++i)
      if (equal_in_constant_time(*authorization, expected_[i])) match = i + 1;
    admin = !expected_admin_.empty() && equal_in_constant_time(*authorization, expected_admin_);
  }
  if (admin) {
    *out = {"admin", true};
  } else if (match > 0) {
    *out = {"token " + std::to_string(match), false};
  } else if (expected_.empty()) {
    *out = {"peer " + std::string(peer), false};  // no tokens: the connection is the identity
  } else {
    return false;
  }
  return true;
}

std::string random_request_id() {
  unsigned char bytes[16];
  fill_random(bytes, sizeof bytes);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "req-";
  for (unsigned char b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

CacheSalter::CacheSalter(PrefixCacheIsolation isolation) : isolation_(isolation) {
  fill_random(key_.data(), key_.size());
}

uint64_t CacheSalter::salt(std::string_view owner, uint64_t client_salt) const {
  if (isolation_ == PrefixCacheIsolation::kNone) return client_salt;
  // key (16 bytes) || owner's length (8) || owner || client_salt (8), little-endian numbers: no
  // two (owner, salt) pairs give the same input.
  std::string in(reinterpret_cast<const char*>(key_.data()), key_.size());
  for (int i = 0; i < 8; ++i) in += static_cast<char>((uint64_t{owner.size()} >> (8 * i)) & 0xff);
  in.append(owner);
  for (int i = 0; i < 8; ++i) in += static_cast<char>((client_salt >> (8 * i)) & 0xff);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  uint64_t s = 0;
  if (EVP_Digest(in.data(), in.size(), md, &md_len, EVP_sha256(), nullptr) == 1 && md_len >= 8) {
    for (int i = 0; i < 8; ++i) s |= uint64_t{md[i]} << (8 * i);
    return s;
  }
  // Only out of memory inside OpenSSL: FNV-1a over the same input, which still starts with the
  // secret key, rather than a failed request.
  s = 14695981039346656037ull;
  for (char c : in) s = (s ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return s;
}

}  // namespace flashserve::server
