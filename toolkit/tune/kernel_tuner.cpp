#include "tune/kernel_tuner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "common/error.h"
#include "platform/cpu_info.h"
#include "process/subprocess.h"
#include "tune/timing_program.h"
#include "tune/tuning_experience.h"

namespace mi::tune {
namespace fs = std::filesystem;
using nlohmann::json;

// One decoder layer's linear layers as a dense family's forward dispatches them: q/k/v in one linear_parts call and
// gate/up in another, whose row blocks are those of one matrix of the summed rows (for_row_blocks splits the total;
// only a block straddling two parts becomes two kernel calls there), then o and down.
ModelShapes model_shapes(const coverage::Plan& plan, const std::string& op) {
  auto dim = [&](const char* k) { return int(plan.dims.value(k, int64_t(0))); };
  const int H = dim("hidden_size"), I = dim("intermediate_size"), nH = dim("num_attention_heads"),
            nKV = dim("num_key_value_heads"), V = dim("vocab_size");
  const int D = dim("head_dim") > 0 ? dim("head_dim") : (nH > 0 ? H / nH : 0);
  if (H <= 0 || I <= 0 || nH <= 0 || nKV <= 0 || D <= 0) fail("tune: the plan lacks the model's dimensions");
  ModelShapes s;
  s.layer = {{(nH + 2 * nKV) * D, H}, {H, nH * D}, {2 * I, H}, {H, I}};
  if (op != "matmul" && V > 0) s.head = {V, H};  // decode also streams the LM head
  s.layers = std::max(1, dim("num_hidden_layers"));
  return s;
}

StreamedPass streamed_shapes(const ModelShapes& model, double max_bytes, double element_bytes) {
  const auto bytes = [&](const std::pair<int, int>& s) { return element_bytes * s.first * s.second; };
  double layer_bytes = 0;
  for (const auto& s : model.layer) layer_bytes += bytes(s);
  const double head_bytes = model.head ? bytes(*model.head) : 0.0;
  const double fit = std::floor((max_bytes - head_bytes) / std::max(layer_bytes, 1.0));
  StreamedPass out;
  out.layers = int(std::clamp(fit, 1.0, double(model.layers)));  // clamped as a double: no int overflow
  for (int l = 0; l < out.layers; ++l) out.shapes.insert(out.shapes.end(), model.layer.begin(), model.layer.end());
  if (model.head) out.shapes.push_back(*model.head);
  return out;
}

TuningChoice choose_value(const std::map<int, std::vector<double>>& runs, int default_value) {
  TuningChoice out;
  const auto def = runs.find(default_value);
  const bool default_ran = def != runs.end() && !def->second.empty();
  // Rounds value v was faster than the default in, of the rounds both ran.
  const auto wins = [&](const std::vector<double>& r) {
    const std::size_t rounds = std::min(r.size(), def->second.size());
    std::size_t w = 0;
    for (std::size_t i = 0; i < rounds; ++i) w += r[i] < def->second[i];
    return std::pair<std::size_t, std::size_t>{w, rounds};
  };
  double best = 0;
  std::optional<int> lowest;  // the lowest median of all, for the explanation
  for (const auto& [v, r] : runs) {
    if (r.empty()) continue;
    const double m = median(r);
    if (!lowest || m < median(runs.at(*lowest))) lowest = v;
    // Eligible: the default itself, any value when the default did not run, else a value that beat it in 4 of 5.
    if (default_ran && v != default_value) {
      const auto [w, rounds] = wins(r);
      if (5 * w < 4 * rounds) continue;
    }
    if (!out.value || m < best) out.value = v, best = m;
  }
  if (lowest && out.value && *lowest != *out.value) {
    const auto [w, rounds] = wins(runs.at(*lowest));
    out.why = std::to_string(*lowest) + " had the lowest median but was faster than the default " +
              std::to_string(default_value) + " in only " + std::to_string(w) + " of " + std::to_string(rounds) +
              " rounds (" + std::to_string((4 * rounds + 4) / 5) + " needed)";
  }
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) fail("tune: the median of no runs");
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

std::string find_compiler() {
  for (const char* c : {"c++", "g++"}) {
    const process::RunResult r = process::run({c, "--version"}, {.timeout_s = 30});
    if (r.exit_code == 0) return c;
  }
  fail("tune: no C++ compiler (c++ or g++) on PATH; ./setup.sh installs g++");
}

std::string join(const std::vector<std::string>& items) {  // "a, b, c"
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

// The kernel level's sources, and the thread pool the timing program runs model::linear on (as the engine does).
std::vector<fs::path> level_sources(const fs::path& components, const std::string& level) {
  std::vector<fs::path> out;
  for (const fs::path& dir : {components / "kernels" / level, components / "kernels" / "scalar", components / "kernels"})
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() == ".cpp") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  out.push_back(components / "runtime" / "thread_pool.cpp");
  return out;
}

// The most tokens one decode step of the engine computes: its max_batch, within the dot forms' 8.
int decode_batch(const coverage::Plan& plan) { return std::clamp(plan.constraints.max_batch, 1, 8); }

}  // namespace

std::pair<std::string, std::string> untimed_reason(const ckb::TuningParameter& param, const coverage::Plan& plan) {
  const std::string mode = plan.constraints.numerics == "fast" ? "fast" : "precise";
  const std::vector<std::string> dtypes = param.dtypes.empty() ? std::vector<std::string>{"bf16"} : param.dtypes;
  if (std::find(dtypes.begin(), dtypes.end(), plan.dtype) == dtypes.end())
    // The timing program runs bf16- and int8-weight kernels, and a parameter names the weight dtypes whose kernels
    // read it (ckb/platforms [[tuning]] dtypes); f32 engines, and e.g. the bf16-only prefill choice in an int8
    // engine, keep the default.
    return {"the platform declares " + param.parameter + " for " + join(dtypes) +
                " weights; this engine computes with " + plan.dtype + " weights, so it keeps its default",
            plan.dtype + " weights"};
  if (!param.numerics.empty() && std::find(param.numerics.begin(), param.numerics.end(), mode) == param.numerics.end())
    // e.g. a precise engine does not read the fast-mode prefill choice MI_TUNE_BF16_PREFILL.
    return {"the platform declares " + param.parameter + " for " + param.numerics.front() + " numerics only; this engine's " +
                mode + " kernels do not read it",
            mode + " numerics"};
  const int batch = decode_batch(plan);
  if (param.op == "batch" && batch < param.min_tokens)
    // e.g. MI_TUNE_BATCH_PREFETCH: blocks of fewer tokens read another parameter (row_streams.h).
    return {"the platform declares " + param.parameter + " for decode blocks of at least " + std::to_string(param.min_tokens) +
                " tokens; this engine decodes at most " + std::to_string(batch) + " at once (max_batch), so it keeps its default "
                "(only a prefill of that few tokens reads it)",
            "max_batch " + std::to_string(plan.constraints.max_batch)};
  return {};
}

int timing_tokens(const coverage::Plan& plan, const std::string& op, int prefill_tokens) {
  return op == "matvec" ? 1 : op == "decode" || op == "batch" ? decode_batch(plan) : prefill_tokens;
}

TuneResult tune_kernels(const ckb::Platform& platform, const coverage::Plan& plan, const TuneOptions& o) {
  TuneResult result;
  result.report = json::object();
  if (platform.tuning.empty()) return result;
  const fs::path components = o.repo_root / "components";
  if (!fs::is_directory(components / "kernels" / platform.kernel_level))
    fail("tune: kernel level sources not found at ", (components / "kernels" / platform.kernel_level).string());
  const bool own_dir = o.work_dir.empty();
  fs::path work = o.work_dir;
  if (own_dir) {
    std::string tmpl = (fs::temp_directory_path() / "mi-tune-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) fail("tune: cannot create a temporary directory");
    work = tmpl;
  }
  fs::create_directories(work);
  const std::string cxx = find_compiler();
  const fs::path main_cpp = work / "tune_main.cpp";
  std::ofstream(main_cpp) << timing_program_source(platform.kernel_level, platform.kernel_struct);
  const auto sources = level_sources(components, platform.kernel_level);

  const bool fast = plan.constraints.numerics == "fast";
  const std::string mode = fast ? "fast" : "precise";
  for (const auto& param : platform.tuning) {
    // A parameter this engine's kernels do not read is not timed (identical programs would be chosen by noise).
    const auto [skipped, why] = untimed_reason(param, plan);
    if (!skipped.empty()) {
      result.report[param.parameter] = {{"op", param.op}, {"chosen", nullptr}, {"skipped", skipped}};
      std::cerr << "tune: " << param.parameter << " skipped (" << why << ")\n";
      continue;
    }
    const ModelShapes shapes = model_shapes(plan, param.op);
    // matvec: one token; decode: one token, and the engine's full decode batch (at most the dot forms' 8 tokens)
    // when it batches; batch: that batch alone; matmul: a prefill of prefill_tokens.
    const bool streams = param.op != "matmul";  // decode ops stream the weights from memory, as the model does
    const int tokens = timing_tokens(plan, param.op, o.prefill_tokens);
    json entry = {{"op", param.op}, {"default", param.default_value}, {"summary", param.summary},
                  {"threads", o.threads}, {"tokens", tokens}, {"numerics", mode}, {"dtype", plan.dtype}};
    json shape_list = json::array();
    for (const auto& [r, c] : shapes.layer) shape_list.push_back({r, c});
    if (shapes.head) shape_list.push_back({shapes.head->first, shapes.head->second});
    entry["shapes"] = shape_list;
    // What one timed pass reads: a decode step's proportions for the streamed ops, one layer for matmul.
    const StreamedPass pass = streams ? streamed_shapes(shapes, o.decode_max_bytes, plan.dtype == "int8" ? 1.0 : 2.0)
                                      : StreamedPass{shapes.layer, 1};
    if (streams) entry["layers_per_pass"] = pass.layers;
    // Build one program per value.
    std::map<int, fs::path> binaries;
    std::map<int, json> results;
    for (int v : param.values) {
      const fs::path bin = work / (param.parameter + "_" + std::to_string(v));
      std::vector<std::string> argv = {cxx, "-O3", "-DNDEBUG", "-std=c++20", "-pthread"};
      argv.insert(argv.end(), platform.compile_flags.begin(), platform.compile_flags.end());
      // The values chosen so far in this run (the platform lists its parameters in the order they are tuned), so
      // a parameter is timed with the kernels the engine will have: the prefetch hint's gain depends on the step.
      for (const auto& [name, value] : result.choice)
        if (name != param.parameter) argv.push_back("-D" + name + "=" + std::to_string(value));
      argv.push_back("-D" + param.parameter + "=" + std::to_string(v));
      argv.push_back("-I" + components.string());
      argv.push_back(main_cpp.string());
      for (const auto& s : sources) argv.push_back(s.string());
      argv.push_back("-o");
      argv.push_back(bin.string());
      std::cerr << "tune: building " << param.parameter << "=" << v << "\n";
      const process::RunResult r = process::run(argv, {.timeout_s = 900, .merge_stderr = true});
      if (r.exit_code != 0) fail("tune: building the timing program for ", param.parameter, "=", v, " failed:\n", r.out);
      binaries[v] = bin;
      results[v] = {{"ok", true}, {"seconds", nullptr}, {"runs", json::array()}};
    }
    // Interleaved rounds: every value once per round, so drift on a shared machine hits all of them alike.
    std::vector<std::string> args = {param.op, mode, plan.dtype, std::to_string(o.threads), std::to_string(tokens),
                                     std::to_string(o.repeats)};
    for (const auto& [r, c] : pass.shapes) {
      args.push_back(std::to_string(r));
      args.push_back(std::to_string(c));
    }
    for (int round = 0; round < o.rounds; ++round)
      for (int v : param.values) {
        json& res = results[v];
        if (!res["ok"].get<bool>()) continue;
        std::vector<std::string> argv = {binaries[v].string()};
        argv.insert(argv.end(), args.begin(), args.end());
        const process::RunResult r = process::run(argv, {.timeout_s = 900});
        json line;
        try {
          line = json::parse(r.out);
        } catch (const json::exception&) {
          line = {{"ok", false}, {"error", "exit " + std::to_string(r.exit_code) + ": " + r.out + r.err}};
        }
        if (!line.value("ok", false)) {
          res["ok"] = false;
          res["error"] = line.value("error", std::string("failed"));
          continue;
        }
        res["runs"].push_back(line.at("seconds").get<double>());
        res["bytes"] = line.at("bytes");
        res["flops"] = line.at("flops");
      }
    // The choice is by the median of a value's rounds, not its best: this host's read bandwidth is bimodal (issue 9),
    // and a best-of picks whichever value met a fast minute. Measured on AMD Zen 5 (2026-12-04, session 28):
    // MI_TUNE_ROW_STREAMS 0 took 16.8 / 15.8 / 13.4 ms against 14.8 / 14.1 / 14.6 for 1 and won on its best. And the
    // default stays unless another value beats it in most rounds (choose_value).
    std::map<int, std::vector<double>> passing;
    json values = json::object();
    for (int v : param.values) {
      json& res = results[v];
      if (res["ok"].get<bool>() && !res["runs"].empty()) {
        std::vector<double>& runs = passing[v];
        for (const auto& r : res["runs"]) runs.push_back(r.get<double>());
        const double s = median(runs);
        res["seconds"] = s;
        res["best_seconds"] = *std::min_element(runs.begin(), runs.end());
        if (streams) res["weights_gbs"] = res["bytes"].get<double>() / s / 1e9;
        else res["gflops"] = res["flops"].get<double>() / s / 1e9;
      }
      values[std::to_string(v)] = res;
    }
    const TuningChoice choice = choose_value(passing, param.default_value);
    const std::optional<int> chosen = choice.value;  // none when no value built and ran (0 is a legal value)
    if (!choice.why.empty()) entry["kept_default"] = choice.why;
    entry["values"] = values;
    entry["chosen"] = chosen ? json(*chosen) : json(nullptr);
    if (chosen) result.choice[param.parameter] = *chosen;
    result.report[param.parameter] = entry;
    std::cerr << "tune: " << param.parameter << " = " << (chosen ? std::to_string(*chosen) : "default (no value passed)")
              << (choice.why.empty() ? "" : " (kept: " + choice.why + ")") << "\n";
  }
  if (own_dir) {
    std::error_code ec;
    fs::remove_all(work, ec);
  }
  return result;
}

void record_experience(const fs::path& file, const ckb::Platform& platform, const coverage::Plan& plan,
                       const TuneResult& result) {
  bool measured = false;
  for (const auto& [name, entry] : result.report.items()) measured = measured || !entry.contains("skipped");
  if (!measured) return;
  const bool exists = fs::exists(file);
  std::ofstream out(file, std::ios::app);
  if (!out) fail(file.string(), ": cannot append the tuning measurements");
  if (!exists)
    out << "# Kernel tuning measurements written by `metainfer generate --tune` (toolkit/tune): which value of each\n"
           "# platform kernel parameter was kept, on which CPU, for which model shapes, with every timing. The next\n"
           "# engine for the same platform starts from these instead of from scratch. seconds: each value's median\n"
           "# round (statistic = \"median\", every round in runs); entries without a statistic hold its best round.\n";
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const platform::CpuInfo cpu = platform::detect_cpu();
  for (const auto& [name, entry] : result.report.items()) {
    if (entry.contains("skipped")) continue;  // nothing was measured
    out << "\n[[measurement]]\n"
        << "date = \"" << date << "\"\n"
        << "platform = \"" << platform.id << "\"\n"
        << "cpu = " << json(cpu.brand).dump() << "\n"
        << "cpu_vendor = " << json(cpu.vendor).dump() << "\n"
        << "cpu_family = " << cpu.family << "\n"
        << "cpu_model = " << cpu.model << "\n"
        << "model = " << json(plan.constraints.model.filename().string()).dump() << "\n"
        << "parameter = \"" << name << "\"\n"
        << "op = \"" << entry.at("op").get<std::string>() << "\"\n"
        << "threads = " << entry.at("threads").get<int>() << "\n"
        << "tokens = " << entry.at("tokens").get<int>() << "\n"
        << "numerics = " << entry.at("numerics").dump() << "\n"
        << "dtype = " << entry.at("dtype").dump() << "\n"
        << "shapes = " << entry.at("shapes").dump() << "\n"
        << "chosen = " << (entry.at("chosen").is_null() ? std::string("\"default\"") : entry.at("chosen").dump()) << "\n"
        << "seconds = { ";
    bool first = true;
    for (const auto& [v, res] : entry.at("values").items()) {
      out << (first ? "" : ", ") << "\"" << v << "\" = "
          << (res.at("seconds").is_null() ? std::string("-1.0") : json(res.at("seconds").get<double>()).dump());
      first = false;
    }
    // seconds: each value's median round (the statistic the choice used); runs: every round's time.
    out << " }\nstatistic = \"median\"\n";
    if (entry.contains("kept_default")) out << "kept_default = " << entry.at("kept_default").dump() << "\n";
    out << "runs = { ";
    first = true;
    for (const auto& [v, res] : entry.at("values").items()) {
      out << (first ? "" : ", ") << "\"" << v << "\" = " << (res.contains("runs") ? res.at("runs").dump() : "[]");
      first = false;
    }
    out << " }\n";
  }
}

}  // namespace mi::tune
