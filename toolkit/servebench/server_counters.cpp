#include "servebench/server_counters.h"

#include <cstdlib>
#include <sstream>
#include <string>

#include "servebench/http_get.h"

namespace mi::servebench {

std::optional<ServerCounters> parse_counters(const std::string& exposition) {
  ServerCounters c;
  const std::pair<const char*, double*> wanted[] = {
      {"metainfer_prefill_forward_tokens_total", &c.prefill_tokens},
      {"metainfer_prefill_forward_seconds_total", &c.prefill_seconds},
      {"metainfer_decode_steps_total", &c.decode_steps},
      {"metainfer_decode_tokens_total", &c.decode_tokens},
      {"metainfer_decode_seconds_total", &c.decode_seconds}};
  int found = 0;
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t space = line.find(' ');
    if (space == std::string::npos) continue;
    const std::string name = line.substr(0, space);
    for (const auto& [metric, out] : wanted)
      if (name == metric) {
        char* end = nullptr;
        const std::string value = line.substr(space + 1);
        const double v = std::strtod(value.c_str(), &end);
        if (end == value.c_str()) return std::nullopt;
        *out = v;
        ++found;
      }
  }
  if (found != int(std::size(wanted))) return std::nullopt;
  return c;
}

std::optional<ServerCounters> scrape_counters(const ServerUrl& url, double timeout_s) {
  const HttpGetResult res = http_get(url, "/metrics", timeout_s);
  if (!res.connected || res.status != 200) return std::nullopt;
  return parse_counters(res.body);
}

nlohmann::json server_work(const std::optional<ServerCounters>& before, const std::optional<ServerCounters>& after) {
  if (!before || !after) return nullptr;
  const double decode_tokens = after->decode_tokens - before->decode_tokens;
  const double decode_s = after->decode_seconds - before->decode_seconds;
  const double steps = after->decode_steps - before->decode_steps;
  const double prefill_tokens = after->prefill_tokens - before->prefill_tokens;
  const double prefill_s = after->prefill_seconds - before->prefill_seconds;
  auto ratio = [](double a, double b) { return b > 0 ? nlohmann::json(a / b) : nlohmann::json(nullptr); };
  return {{"decode_tokens", decode_tokens},   {"decode_steps", steps},
          {"decode_s", decode_s},             {"decode_tok_s", ratio(decode_tokens, decode_s)},
          {"mean_decode_batch", ratio(decode_tokens, steps)},
          {"prefill_tokens", prefill_tokens}, {"prefill_s", prefill_s},
          {"prefill_tok_s", ratio(prefill_tokens, prefill_s)}};
}

}  // namespace mi::servebench
