#include "bench/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

#include "bench/report.h"

namespace mi::bench {
using nlohmann::json;

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string f(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

struct Bar {
  double value = NAN, stddev = 0;
  const char* color;
  const char* name;
};

struct Group {
  std::string label;
  std::vector<Bar> bars;
};

constexpr const char* kOurs = "#1f77b4";
constexpr const char* kBaseline = "#ff7f0e";
constexpr const char* kBound = "#b0b0b0";
constexpr const char* kOursWarm = "#9ecae1";  // our prefill timed warm, as llama-bench times pp (the pp row)

double stat_mean(const json& s) { return s.is_object() ? s["mean"].get<double>() : NAN; }
double stat_sd(const json& s) { return s.is_object() ? s["stddev"].get<double>() : 0; }

// One panel at vertical offset y0: groups of bars on a log axis.
void panel(std::ostringstream& svg, const std::string& title, const std::vector<Group>& groups, double x0, double y0, double width,
           double height) {
  double lo = INFINITY, hi = 0;
  for (const auto& g : groups)
    for (const auto& b : g.bars)
      if (std::isfinite(b.value) && b.value > 0) lo = std::min(lo, b.value), hi = std::max(hi, b.value + b.stddev);
  svg << "<text x=\"" << f(x0) << "\" y=\"" << f(y0 + 14) << "\" font-size=\"13\" font-weight=\"bold\">" << escape(title) << "</text>\n";
  const double top = y0 + 24, bottom = y0 + height - 34, left = x0 + 56, right = x0 + width - 8;
  svg << "<line x1=\"" << f(left) << "\" y1=\"" << f(bottom) << "\" x2=\"" << f(right) << "\" y2=\"" << f(bottom) << "\" stroke=\"#333\"/>\n";
  svg << "<line x1=\"" << f(left) << "\" y1=\"" << f(top) << "\" x2=\"" << f(left) << "\" y2=\"" << f(bottom) << "\" stroke=\"#333\"/>\n";
  if (!(hi > 0)) {
    svg << "<text x=\"" << f(left + 10) << "\" y=\"" << f((top + bottom) / 2) << "\" font-size=\"12\">no data</text>\n";
    return;
  }
  // The axis starts a little below the smallest bar, so a bar that sits exactly on a decade still shows.
  const double d0 = std::floor(std::log10(lo) - 0.1), d1 = std::max(d0 + 1, std::ceil(std::log10(hi)));
  auto y_of = [&](double v) { return bottom - (std::log10(v) - d0) / (d1 - d0) * (bottom - top); };
  for (double d = d0; d <= d1; d += 1) {
    const double y = y_of(std::pow(10, d));
    svg << "<line x1=\"" << f(left - 4) << "\" y1=\"" << f(y) << "\" x2=\"" << f(right) << "\" y2=\"" << f(y)
        << "\" stroke=\"#e0e0e0\"/>\n<text x=\"" << f(left - 6) << "\" y=\"" << f(y + 4) << "\" font-size=\"10\" text-anchor=\"end\">1e"
        << int(d) << "</text>\n";
  }
  const double group_w = (right - left) / std::max<std::size_t>(1, groups.size());
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const Group& g = groups[gi];
    const double bar_w = std::min(28.0, (group_w - 12) / std::max<std::size_t>(1, g.bars.size()));
    const double gx = left + gi * group_w + (group_w - bar_w * g.bars.size()) / 2;
    for (std::size_t bi = 0; bi < g.bars.size(); ++bi) {
      const Bar& b = g.bars[bi];
      if (!std::isfinite(b.value) || b.value <= 0) continue;
      const double x = gx + bi * bar_w, y = std::min(bottom, y_of(std::max(b.value, std::pow(10, d0))));
      svg << "<rect x=\"" << f(x + 1) << "\" y=\"" << f(y) << "\" width=\"" << f(bar_w - 2) << "\" height=\"" << f(bottom - y)
          << "\" fill=\"" << b.color << "\"><title>" << escape(g.label + " " + b.name + ": " + format_number(b.value) + " tok/s")
          << "</title></rect>\n";
      if (b.stddev > 0 && b.value - b.stddev > 0) {
        const double cx = x + bar_w / 2, ya = y_of(b.value + b.stddev), yb = y_of(b.value - b.stddev);
        svg << "<line x1=\"" << f(cx) << "\" y1=\"" << f(ya) << "\" x2=\"" << f(cx) << "\" y2=\"" << f(yb) << "\" stroke=\"#000\"/>\n";
      }
    }
    svg << "<text x=\"" << f(left + gi * group_w + group_w / 2) << "\" y=\"" << f(bottom + 14)
        << "\" font-size=\"10\" text-anchor=\"middle\">" << escape(g.label) << "</text>\n";
  }
  svg << "<text x=\"" << f(x0 + 10) << "\" y=\"" << f((top + bottom) / 2) << "\" font-size=\"10\" transform=\"rotate(-90 " << f(x0 + 10)
      << " " << f((top + bottom) / 2) << ")\" text-anchor=\"middle\">tokens/s (log)</text>\n";
}

}  // namespace

std::string to_svg(const json& r) {
  bool with_baseline = false;
  std::vector<Group> decode, prefill;
  for (const json& c : r["cells"]) {
    if (c.contains("skipped")) continue;
    with_baseline = with_baseline || c.contains("baseline");
  }
  // The warm prefill of each prompt length (the llama-bench table's pp rows measured in-process), shown beside the
  // cells' fresh-process figure: the baseline's llama-bench pp is timed warm.
  std::map<int, json> warm_pp;
  for (const json& row : r.value("llama_bench", json::array()))
    if (row.value("source", std::string()) == "warm" && row.contains("cell") && row["cell"].is_array())
      warm_pp[row["cell"][0].get<int>()] = row["tok_s"];
  for (const json& c : r["cells"]) {
    if (c.contains("skipped")) continue;
    std::string label = "p";
    label += std::to_string(c["prompt_tokens"].get<int>());
    label += " n";
    label += std::to_string(c["gen_tokens"].get<int>());
    Group d{label, {}}, p{label, {}};
    d.bars.push_back({stat_mean(c["metrics"]["decode_tok_s"]), stat_sd(c["metrics"]["decode_tok_s"]), kOurs, "ours"});
    p.bars.push_back({stat_mean(c["metrics"]["prefill_tok_s"]), stat_sd(c["metrics"]["prefill_tok_s"]), kOurs, "ours (fresh process)"});
    if (!warm_pp.empty()) {
      const auto w = warm_pp.find(c["prompt_tokens"].get<int>());
      const json warm = w == warm_pp.end() ? json(nullptr) : w->second;
      p.bars.push_back({stat_mean(warm), stat_sd(warm), kOursWarm, "ours, warm (pp row)"});
    }
    if (with_baseline) {
      const json& bm = c.contains("baseline") ? c["baseline"]["metrics"] : json::object();
      d.bars.push_back({stat_mean(bm.value("decode_tok_s", json(nullptr))), stat_sd(bm.value("decode_tok_s", json(nullptr))), kBaseline, "baseline"});
      p.bars.push_back({stat_mean(bm.value("prefill_tok_s", json(nullptr))), stat_sd(bm.value("prefill_tok_s", json(nullptr))), kBaseline, "baseline"});
    }
    d.bars.push_back({c["bounds"]["decode_tok_s"].get<double>(), 0, kBound, "bound"});
    p.bars.push_back({c["bounds"]["prefill_tok_s"].get<double>(), 0, kBound, "bound"});
    decode.push_back(d);
    prefill.push_back(p);
  }
  const std::string title = "metainfer bench: " + r["engine"]["name"].get<std::string>() + " (" + r["settings"]["matrix"].get<std::string>() +
                            " matrix, " + std::to_string(r["settings"]["threads"].get<int>()) + " threads)";
  const double width = std::max({520.0, 90.0 + decode.size() * (with_baseline ? 96.0 : 72.0), 30.0 + 8.5 * title.size()});
  const double panel_h = 250, height = 40 + 2 * panel_h + 30;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << f(width) << "\" height=\"" << f(height) << "\" viewBox=\"0 0 "
      << f(width) << " " << f(height) << "\" font-family=\"sans-serif\">\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg << "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">"
      << escape(title) << "</text>\n";
  panel(svg, "decode tokens/s per cell (p = prompt, n = generated)", decode, 10, 36, width - 20, panel_h);
  panel(svg, "prefill tokens/s per cell (ours: a fresh process's first prefill; warm: as llama-bench times pp)", prefill, 10,
        36 + panel_h, width - 20, panel_h);
  double lx = 16;
  const double ly = height - 14;
  std::vector<std::pair<const char*, const char*>> legend = {{kOurs, "ours (mean ± stddev)"}};
  if (!warm_pp.empty()) legend.push_back({kOursWarm, "ours, prefill warm (pp row)"});
  if (with_baseline) legend.push_back({kBaseline, "baseline"});
  legend.push_back({kBound, "bound (machine limit)"});
  for (const auto& [color, name] : legend) {
    svg << "<rect x=\"" << f(lx) << "\" y=\"" << f(ly - 10) << "\" width=\"12\" height=\"12\" fill=\"" << color << "\"/>\n<text x=\""
        << f(lx + 16) << "\" y=\"" << f(ly) << "\" font-size=\"11\">" << escape(name) << "</text>\n";
    lx += 30 + 7.0 * std::string(name).size();
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace mi::bench
