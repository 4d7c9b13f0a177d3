#include "server/grpc/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace flashserve::server {

namespace {

// %* in a pattern: the message with its control characters escaped, for plain text or for a
// JSON string (which also escapes '"' and '\').
class EscapedMessage : public spdlog::custom_flag_formatter {
 public:
  explicit EscapedMessage(LogFormat format) : format_(format) {}

  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const bool json = format_ == LogFormat::kJson;
    for (const char c : std::string_view(msg.payload.data(), msg.payload.size())) {
      const auto u = static_cast<unsigned char>(c);
      if (json && (c == '"' || c == '\\')) {
        dest.push_back('\\');
        dest.push_back(c);
      } else if (c == '\n') {
        dest.append(std::string_view("\\n"));
      } else if (c == '\t') {
        dest.append(std::string_view("\\t"));
      } else if (c == '\r' && !json) {
        dest.append(std::string_view("\\r"));
      } else if (u < 0x20 || (u == 0x7f && !json)) {
        char buf[8];
        std::snprintf(buf, sizeof buf, json ? "\\u%04x" : "\\x%02x", u);
        dest.append(std::string_view(buf));
      } else {
        dest.push_back(c);
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<EscapedMessage>(format_); }

 private:
  LogFormat format_;
};

}  // namespace

std::unique_ptr<spdlog::formatter> make_log_formatter(LogFormat format) {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<EscapedMessage>('*', format);
  formatter->set_pattern(format == LogFormat::kJson ? R"({"time":"%Y-%m-%dT%H:%M:%S.%e","level":"%l","msg":"%*"})"
                                                    : "[%Y-%m-%d %H:%M:%S.%e] [%n] [%^%l%$] %*");
  return formatter;
}

void setup_logging() {
  auto logger = spdlog::stderr_color_mt("flashserve");
  spdlog::set_default_logger(logger);
  const char* fmt = std::getenv("LOG_FORMAT");
  spdlog::set_formatter(make_log_formatter(fmt && std::string(fmt) == "json" ? LogFormat::kJson : LogFormat::kText));
  const char* level = std::getenv("LOG_LEVEL");
  spdlog::set_level(level ? spdlog::level::from_str(level) : spdlog::level::info);
}

}  // namespace flashserve::server
