// The log formats (issue 24, point 7): a message with control characters, as a client can put
// into a field (a stop string, a prompt error), stays one line in plain text and in JSON, and no
// escape sequence reaches the terminal.
#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <sstream>

#include "server/grpc/logging.h"

namespace flashserve::server {
namespace {

std::string format_one(LogFormat format, const std::string& message) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("flashserve", sink);
  logger.set_formatter(make_log_formatter(format));
  logger.info("request {} rejected", message);
  return out.str();
}

const std::string kHostile = std::string("a\nb\r\n[2026-01-01 00:00:00.000] [flashserve] [info] forged\t\x1b[31mred\x7f\x01") +
                             std::string(1, '\0') + "\"q\\";

TEST(Logging, PlainTextEscapesControlCharacters) {
  const std::string line = format_one(LogFormat::kText, kHostile);
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
  EXPECT_EQ(line.back(), '\n');
  for (unsigned char c : line.substr(0, line.size() - 1))
    EXPECT_TRUE(c >= 0x20 && c != 0x7f) << "raw control byte " << static_cast<int>(c) << " in: " << line;
  EXPECT_NE(line.find(R"(request a\nb\r\n[2026-01-01 00:00:00.000] [flashserve] [info] forged\t\x1b[31mred\x7f\x01\x00"q\ rejected)"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("] [flashserve] [info] request "), std::string::npos) << line;
}

TEST(Logging, JsonIsOneObjectALine) {
  const std::string line = format_one(LogFormat::kJson, kHostile);
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
  for (unsigned char c : line.substr(0, line.size() - 1)) EXPECT_GE(c, 0x20) << line;
  EXPECT_NE(line.find(R"("msg":"request a\nb\u000d\n[2026-01-01 00:00:00.000] [flashserve] [info] forged\t\u001b[31mred)"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(R"(\u0001\u0000\"q\\ rejected"})"), std::string::npos) << line;
}

TEST(Logging, OrdinaryMessagesAreUnchanged) {
  EXPECT_NE(format_one(LogFormat::kText, "req-7 (3 prompt tokens, caf\xc3\xa9)").find("request req-7 (3 prompt tokens, caf\xc3\xa9) rejected\n"),
            std::string::npos);
}

}  // namespace
}  // namespace flashserve::server
