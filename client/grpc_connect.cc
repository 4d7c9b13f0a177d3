#include "client/grpc_connect.h"

#include <chrono>
#include <cstdio>

#include "flashserve/v1/generation.grpc.pb.h"

namespace flashserve::client {

bool wait_connected(const std::shared_ptr<grpc::Channel>& channel, const std::string& target, double timeout_s,
                    std::string* error) {
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(timeout_s));
  if (channel->WaitForConnected(std::chrono::system_clock::now() + wait)) return true;
  // A call on a channel that is not READY fails at once with the last connection error.
  grpc::ClientContext ctx;
  flashserve::v1::ModelInfo info;
  char s[32];
  std::snprintf(s, sizeof s, "%g", timeout_s);
  const grpc::Status st = flashserve::v1::Generation::NewStub(channel)->GetModelInfo(&ctx, {}, &info);
  *error = "no connection to " + target + " in " + s + " s: " + st.error_message();
  return false;
}

}  // namespace flashserve::client
