// The process's log: one line a record on stderr, plain text (spdlog's pattern) or, with
// LOG_FORMAT=json, one JSON object a line; LOG_LEVEL sets the level. In both formats the
// message's control characters are escaped (plain text: \n, \r, \t, \xNN for the others and DEL;
// JSON: \n, \t, \u00NN), so no field, whatever a client put into it, can forge a log line or
// send terminal escape sequences.
#pragma once

#include <spdlog/formatter.h>

#include <memory>

namespace flashserve::server {

enum class LogFormat { kText, kJson };

// The formatter of one format (the tests format records with it).
std::unique_ptr<spdlog::formatter> make_log_formatter(LogFormat format);

// The default logger "flashserve" on stderr, in the format and level the environment asks for.
void setup_logging();

}  // namespace flashserve::server
