// Who a call comes from, and what that identity owns (issue 24, points 12, 14 and 15).
//
// Every request has an owner, the identity of the caller that sent it:
// - with bearer tokens (--auth-token, FLASHSERVE_AUTH_TOKEN, or --auth-token-file with one token
//   a line), the token: each token is one tenant, "token N" (its place in the list, never the
//   token itself). Holders of the same token are one tenant, so give each tenant its own token;
// - the admin token (--admin-token-file): "admin";
// - with no tokens configured, the connection: "peer " + gRPC's peer address
//   ("peer ipv4:10.0.0.7:53124"). Without auth there is no other identity to go by; behind a
//   proxy (Envoy) the peers are the proxy's connections, so use tokens there.
// The owner is the namespace of its request ids (two owners may use the same id at once; a
// server-assigned id is "req-" + 32 random hex digits), Abort reaches only the caller's own
// requests (another owner's id is answered exactly as an unknown one) unless the caller holds the
// admin token, and with --prefix-cache-isolation=identity it salts the prefix-cache key, so two
// identities never share cached blocks.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flashserve::server {

struct Caller {
  std::string owner;   // "token N" (1-based place in the token list), "admin", or "peer <address>"
  bool admin = false;  // holds the admin token: Abort reaches every owner's requests
};

// The bearer tokens a server accepts, and which identity each one is.
class Credentials {
 public:
  Credentials() = default;
  // tokens: each one tenant, in order ("token 1", ...); empty: calls need no token. admin_token:
  // empty for none; it is accepted wherever a token is.
  Credentials(const std::vector<std::string>& tokens, const std::string& admin_token);

  bool tokens_required() const { return !expected_.empty(); }
  // The caller of a call whose "authorization" metadata is `authorization` (null: none sent) and
  // whose connection is `peer`. False (UNAUTHENTICATED) when tokens are required and it holds
  // none of them. Every token is compared, each in constant time (equal_in_constant_time), so
  // the time does not tell which one matched or where a wrong one differs.
  bool identify(const std::string_view* authorization, std::string_view peer, Caller* out) const;

 private:
  std::vector<std::string> expected_;  // "Bearer <token>" for each tenant token
  std::string expected_admin_;         // "Bearer <admin token>"; empty: no admin token
};

// A server-assigned request id: "req-" + 32 lowercase hex digits, 128 bits from getrandom(2)
// (the kernel's CSPRNG), so that nobody can guess another caller's id.
std::string random_request_id();

enum class PrefixCacheIsolation {
  kNone,      // every caller shares the prefix cache (the default: the throughput win)
  kIdentity,  // each caller identity has its own (cache_salt salted by the owner)
};

// The prefix-cache key (the engine's cache_salt) of a request. kNone: the client's cache_salt as
// sent. kIdentity: SHA-256 of a key drawn at start-up, the owner and the client's cache_salt,
// so that no two owners share a block (but by a 2^-64 chance) and no client can pick a
// cache_salt that lands in another owner's blocks.
class CacheSalter {
 public:
  explicit CacheSalter(PrefixCacheIsolation isolation);
  uint64_t salt(std::string_view owner, uint64_t client_salt) const;

 private:
  PrefixCacheIsolation isolation_;
  std::array<unsigned char, 16> key_{};
};

}  // namespace flashserve::server
