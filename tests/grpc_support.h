// Test support for the gRPC server tests: a channel to a test server on this host, connected
// before the test's first call on it.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

namespace flashserve::test {

// An insecure channel to 127.0.0.1:port, READY when returned (or a test failure after 20 s).
// gRPC 1.51's posix connect (Debian 12's) can fail a first connect that was in progress: it reads
// errno after calls that may change it, and reports "failed to connect to all addresses; ...
// connect: No such file or directory". An RPC on the channel then fails UNAVAILABLE at once,
// and the channel tries again only after its backoff (1 s). Seen under load (ctest -j2, four
// test loops at once on two cores: 8 of 600 runs of GrpcOwner.ServerIdsAreRandom128Bit), always
// a thread's first call. Waiting for READY keeps that out of what the tests check.
inline std::shared_ptr<grpc::Channel> local_channel(int port, const grpc::ChannelArguments& args = {}) {
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args);
  EXPECT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20)))
      << "no connection to 127.0.0.1:" << port << " in 20 s";
  return channel;
}

}  // namespace flashserve::test
