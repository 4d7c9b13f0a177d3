#include "client/svg_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

namespace flashserve::client {

namespace {

constexpr double kW = 460, kH = 260, kPad = 45;

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

// One panel at (x0, y0): axes, a title, and a polyline of (x, y) points scaled to the panel.
std::string panel(double x0, double y0, const std::string& title, const std::string& xlabel,
                  const std::vector<std::pair<double, double>>& pts, double y_max_fixed) {
  std::string out = "<g transform=\"translate(" + num(x0) + "," + num(y0) + ")\">\n";
  out += "<rect width=\"" + num(kW) + "\" height=\"" + num(kH) + "\" fill=\"white\" stroke=\"#ccc\"/>\n";
  out += "<text x=\"" + num(kW / 2) + "\" y=\"18\" text-anchor=\"middle\" font-size=\"14\">" + title + "</text>\n";
  const double pw = kW - 2 * kPad, ph = kH - 2 * kPad;
  out += "<line x1=\"" + num(kPad) + "\" y1=\"" + num(kPad + ph) + "\" x2=\"" + num(kPad + pw) + "\" y2=\"" +
         num(kPad + ph) + "\" stroke=\"black\"/>\n";
  out += "<line x1=\"" + num(kPad) + "\" y1=\"" + num(kPad) + "\" x2=\"" + num(kPad) + "\" y2=\"" + num(kPad + ph) +
         "\" stroke=\"black\"/>\n";
  double xmax = 0, ymax = y_max_fixed;
  for (const auto& [x, y] : pts) {
    xmax = std::max(xmax, x);
    if (y_max_fixed <= 0) ymax = std::max(ymax, y);
  }
  if (xmax <= 0) xmax = 1;
  if (ymax <= 0) ymax = 1;
  out += "<text x=\"" + num(kPad + pw) + "\" y=\"" + num(kPad + ph + 30) + "\" text-anchor=\"end\" font-size=\"11\">" +
         xlabel + " (max " + num(xmax) + ")</text>\n";
  out += "<text x=\"" + num(kPad - 5) + "\" y=\"" + num(kPad + 4) + "\" text-anchor=\"end\" font-size=\"11\">" +
         num(ymax) + "</text>\n";
  out += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"";
  for (const auto& [x, y] : pts) out += num(kPad + pw * x / xmax) + "," + num(kPad + ph * (1 - y / ymax)) + " ";
  out += "\"/>\n</g>\n";
  return out;
}

std::vector<std::pair<double, double>> cdf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<double, double>> pts;
  for (size_t i = 0; i < v.size(); ++i) pts.push_back({v[i], static_cast<double>(i + 1) / v.size()});
  return pts;
}

}  // namespace

std::string svg_report(const Summary& s, const std::vector<RequestRecord>& records) {
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(2 * kW + 30) + "\" height=\"" +
                    num(3 * kH + 40) + "\" font-family=\"sans-serif\">\n";
  const char* names[] = {"ttft", "tpot", "itl", "e2el"};
  const char* titles[] = {"TTFT CDF", "TPOT CDF", "ITL CDF", "E2EL CDF"};
  for (int i = 0; i < 4; ++i)
    out += panel(10 + (i % 2) * (kW + 10), 10 + (i / 2) * (kH + 10), titles[i], "ms", cdf(s.values_ms.at(names[i])), 1.0);
  // Output tokens per second over time, in 20 bins of the run.
  const int bins = 20;
  std::vector<double> tokens(bins, 0.0);
  const double span = std::max(s.duration_s, 1e-9);
  for (const auto& r : records) {
    if (!r.success || r.output_len == 0) continue;
    const double done = r.start_s + r.e2el_s;
    const double first = r.start_s + r.ttft_s;
    // Spread the request's tokens evenly from its first token to its end.
    for (int k = 0; k < r.output_len; ++k) {
      const double t = r.output_len > 1 ? first + (done - first) * k / (r.output_len - 1) : first;
      tokens[std::min(bins - 1, std::max(0, static_cast<int>(t / span * bins)))] += 1;
    }
  }
  std::vector<std::pair<double, double>> tp;
  for (int b = 0; b < bins; ++b) tp.push_back({(b + 0.5) * span / bins, tokens[b] / (span / bins)});
  out += panel(10, 10 + 2 * (kH + 10), "Output throughput over time (tok/s)", "s", tp, 0.0);
  out += "</svg>\n";
  return out;
}

bool write_report(const std::string& path, const Summary& s, const std::vector<RequestRecord>& records) {
  std::ofstream f(path);
  if (!f) return false;
  const std::string svg = svg_report(s, records);
  if (path.size() > 5 && path.substr(path.size() - 5) == ".html")
    f << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>flashserve_bench report</title></head><body>\n"
      << svg << "</body></html>\n";
  else
    f << svg;
  return static_cast<bool>(f);
}

}  // namespace flashserve::client
