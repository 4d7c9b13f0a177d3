// --report FILE.svg / FILE.html: latency CDFs (TTFT, TPOT, ITL, E2EL) and output throughput over
// time as one self-contained SVG (an HTML file wraps the same picture).
#pragma once

#include <string>
#include <vector>

#include "client/serve_stats.h"

namespace flashserve::client {

std::string svg_report(const Summary& s, const std::vector<RequestRecord>& records);
// Writes the SVG, or an HTML page around it when the path ends in .html. False on I/O errors.
bool write_report(const std::string& path, const Summary& s, const std::vector<RequestRecord>& records);

}  // namespace flashserve::client
