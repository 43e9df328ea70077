#include "tune/tuning_experience.h"

#include <algorithm>
#include <optional>

#include <toml++/toml.h>

#include "common/error.h"
#include "tune/kernel_tuner.h"

namespace mi::tune {
namespace {

using nlohmann::json;

struct Measurement {
  std::string date, platform, cpu, cpu_vendor, parameter, op, numerics, dtype;
  int cpu_family = 0, cpu_model = 0, threads = 0, tokens = 0;
  std::optional<int> chosen;  // none: "default" (no candidate passed)
  json seconds = json::object();
};

std::vector<Measurement> read_measurements(const std::filesystem::path& file) {
  std::vector<Measurement> out;
  if (!std::filesystem::exists(file)) return out;
  toml::table root;
  try {
    root = toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    fail(file.string(), ":", e.source().begin.line, ": not valid TOML: ", e.description());
  }
  const toml::array* list = root["measurement"].as_array();
  if (!list) return out;
  for (const toml::node& node : *list) {
    const toml::table* t = node.as_table();
    if (!t) continue;
    Measurement m;
    const auto str = [&](const char* key) { return std::string((*t)[key].value_or(std::string())); };
    const auto integer = [&](const char* key) { return int((*t)[key].value_or(int64_t(0))); };
    m.date = str("date"), m.platform = str("platform"), m.cpu = str("cpu"), m.cpu_vendor = str("cpu_vendor");
    m.parameter = str("parameter"), m.op = str("op"), m.numerics = str("numerics");
    m.dtype = str("dtype");
    if (m.dtype.empty()) m.dtype = "bf16";  // written before int8 engines were timed: the tuner timed bf16 weights only
    m.cpu_family = integer("cpu_family"), m.cpu_model = integer("cpu_model");
    m.threads = integer("threads"), m.tokens = integer("tokens");
    if (const auto v = (*t)["chosen"].value<int64_t>()) m.chosen = int(*v);
    if (const toml::table* s = (*t)["seconds"].as_table())
      for (const auto& [value, time] : *s) m.seconds[std::string(value.str())] = time.value_or(-1.0);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

ExperienceTuning experience_tuning(const std::filesystem::path& experience_file, const ckb::Platform& platform,
                                   const coverage::Plan& plan, const platform::CpuInfo& cpu) {
  ExperienceTuning result;
  if (cpu.vendor.empty() || cpu.family == 0) return result;  // an unidentified CPU matches nothing
  const std::vector<Measurement> all = read_measurements(experience_file);
  const std::string mode = plan.constraints.numerics == "fast" ? "fast" : "precise";
  for (const auto& param : platform.tuning) {
    if (plan.constraints.tuning.count(param.parameter)) continue;  // the constraints decide
    if (!untimed_reason(param, plan).first.empty()) continue;       // the tuner would not time it for this engine
    const int tokens = timing_tokens(plan, param.op, TuneOptions{}.prefill_tokens);
    const Measurement* best = nullptr;
    for (const auto& m : all) {
      if (m.platform != platform.id || m.parameter != param.parameter || !m.chosen) continue;
      // Timed as another op, the value answered another objective: MI_TUNE_DOT_PREFETCH was timed on one token plus
      // the batch until the batched blocks got their own parameter (experience OPT-036).
      if (m.op != param.op) continue;
      if (m.cpu_vendor != cpu.vendor || m.cpu_family != cpu.family || m.cpu_model != cpu.model) continue;
      if (m.threads != plan.threads || m.numerics != mode || m.dtype != plan.dtype) continue;
      if (std::find(param.values.begin(), param.values.end(), *m.chosen) == param.values.end()) continue;
      // The last match wins, but one timed at this engine's token count beats any that was not.
      if (!best || m.tokens == tokens || best->tokens != tokens) best = &m;
    }
    if (!best) continue;
    result.choice[param.parameter] = *best->chosen;
    result.report[param.parameter] = {
        {"op", param.op},
        {"chosen", *best->chosen},
        {"default", param.default_value},
        {"source", "experience"},
        {"experience", {{"file", experience_file.filename().string()},
                        {"date", best->date},
                        {"cpu", best->cpu},
                        {"cpu_family", best->cpu_family},
                        {"cpu_model", best->cpu_model},
                        {"threads", best->threads},
                        {"tokens", best->tokens},
                        {"numerics", best->numerics},
                        {"dtype", best->dtype},
                        {"seconds", best->seconds}}}};
  }
  return result;
}

coverage::Plan plan_with_experience(const ckb::Ckb& ckb, const std::filesystem::path& experience_file,
                                    const std::string& constraints_file, const constraints::Overrides& overrides,
                                    nlohmann::json& report) {
  report = nullptr;
  coverage::Plan plan = coverage::plan_for(ckb, constraints_file, overrides);
  const ckb::Platform* platform = plan.covered ? ckb.find_platform(plan.platform) : nullptr;
  if (!platform) return plan;
  const ExperienceTuning found = experience_tuning(experience_file, *platform, plan, platform::detect_cpu());
  if (found.choice.empty()) return plan;
  report = found.report;
  return plan_with_tuning(ckb, constraints_file, overrides, plan, found.choice);
}

coverage::Plan plan_with_tuning(const ckb::Ckb& ckb, const std::string& constraints_file,
                                const constraints::Overrides& overrides, const coverage::Plan& plan,
                                const std::map<std::string, int>& choice) {
  constraints::Overrides o = overrides;
  std::map<std::string, int> tuning = plan.constraints.tuning;
  for (const auto& [name, value] : choice) tuning[name] = value;
  o.tuning = tuning;
  return coverage::plan_for(ckb, constraints_file, o);
}

}  // namespace mi::tune
