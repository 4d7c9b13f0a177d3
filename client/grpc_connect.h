// The clients' gRPC channel, connected before its first call (flashserve_cli, flashserve_bench).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace flashserve::client {

// Waits up to timeout_s for `channel` (to `target`) to be READY. Why wait at all: gRPC 1.51
// (Debian 12's) can report a first connect failed while it is in progress (its posix connect
// reads errno after calls that may change it: "failed to connect to all addresses; ... connect:
// No such file or directory", about 1 in 500 connects under load), and a call on the channel then
// fails UNAVAILABLE at once; the channel tries again after its backoff, and is READY then. On
// false, *error names the target, the wait and the last connection error (refused, TLS, ...).
bool wait_connected(const std::shared_ptr<grpc::Channel>& channel, const std::string& target, double timeout_s,
                    std::string* error);

}  // namespace flashserve::client
