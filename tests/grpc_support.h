// Test support for the gRPC server tests: a channel to a test server on this host, connected
// before the test's first call on it.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "client/grpc_connect.h"

namespace flashserve::test {

// An insecure channel to 127.0.0.1:port, READY when returned (or a test failure after 20 s): a
// first connect that gRPC 1.51 reports failed would otherwise fail the test's first call
// (client/grpc_connect.h says why; seen under load in GrpcOwner.ServerIdsAreRandom128Bit).
inline std::shared_ptr<grpc::Channel> local_channel(int port, const grpc::ChannelArguments& args = {}) {
  const std::string target = "127.0.0.1:" + std::to_string(port);
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  std::string error;
  EXPECT_TRUE(client::wait_connected(channel, target, 20, &error)) << error;
  return channel;
}

}  // namespace flashserve::test
