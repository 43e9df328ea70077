// L3 evidence (ckb/test_contracts/gates.toml): one short timed run of the engine on its constraints' checkpoint,
// with the subprocess's peak RSS against the weights it maps. Recorded, never compared to a threshold here.
#include <chrono>
#include <cstdio>
#include <sstream>

#include "gates/gates.h"
#include "io/safetensors.h"
#include "process/subprocess.h"

namespace mi::gates {
namespace fs = std::filesystem;

GateResult evidence_gate(const generator::Engine& engine, const GateOptions& options) {
  GateResult g{"L3_evidence", "L3", "performance", false, "", {}, 0, nlohmann::json::object()};
  const fs::path model = engine.manifest.at("constraints").at("model").get<std::string>();
  const int vocab = [&] {
    const auto plan = nlohmann::json::parse(generator::read_file(engine.dir / "plan.json"));
    return plan.at("model").at("dims").value("vocab_size", 2);
  }();
  // A deterministic prompt (ids 1..vocab-1) of 64 tokens and 32 new ones, scaled down to fit a small max_context.
  const int context = nlohmann::json::parse(generator::read_file(engine.dir / "plan.json")).at("constraints").value("max_context", 96);
  const int prompt_tokens = std::max(1, std::min(64, context * 2 / 3)), new_tokens = std::max(1, std::min(32, context - prompt_tokens));
  std::string prompt;
  uint64_t x = 12345;
  for (int i = 0; i < prompt_tokens; ++i) {
    x = (1103515245 * x + 12345) % 2147483648ull;
    prompt += (i ? "," : "") + std::to_string(1 + x % uint64_t(vocab - 1));
  }
  const process::RunResult r = process::run(
      {engine.binary.string(), "generate", "--model", model.string(), "--prompt-ids", prompt, "--max-new-tokens", std::to_string(new_tokens),
       "--threads", std::to_string(options.threads), "--json"},
      {.timeout_s = 900});
  g.commands.push_back(r.command);
  g.duration_s = r.wall_s;
  if (r.exit_code != 0) {
    g.summary = "timing run failed (exit " + std::to_string(r.exit_code) + ")";
    g.evidence["output_tail"] = process::tail(r.err + r.out, 2000);
    return g;
  }
  nlohmann::json result;
  try {
    result = process::last_json_line(r.out);
  } catch (const std::exception&) {
    g.summary = "timing run printed no JSON object";
    return g;
  }
  const io::WeightStore store = io::WeightStore::open(model);
  // The KV cache the engine allocates at start: f32 K and V rows for every layer and KV head, max_batch x max_context.
  const auto plan_json = nlohmann::json::parse(generator::read_file(engine.dir / "plan.json"));
  const auto& dims = plan_json.at("model").at("dims");
  const auto& cons = plan_json.at("constraints");
  const double kv_mb = 2.0 * 4.0 * dims.value("num_hidden_layers", 0) * dims.value("num_key_value_heads", 0) *
                       dims.value("head_dim", 0) * double(cons.value("max_batch", 1)) * double(cons.value("max_context", 0)) /
                       (1024.0 * 1024.0);
  g.evidence = {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", result.value("completion_tokens", 0)},
                {"ttft_ms", result.value("ttft_ms", 0.0)},
                {"tpot_ms", result.value("tpot_ms", 0.0)},
                {"peak_rss_mb", double(r.peak_rss_kb) / 1024.0},
                {"weights_mb", double(store.total_bytes()) / (1024.0 * 1024.0)},
                {"kv_cache_mb_at_constraints", kv_mb},
                {"note", "the timing run's engine sizes its KV cache for one sequence at the engine's max_context"},
                {"threads", options.threads},
                {"binary_bytes", fs::file_size(engine.binary)}};
  g.passed = true;
  char line[256];
  std::snprintf(line, sizeof line, "ttft %.2f ms, tpot %.3f ms, peak RSS %.1f MiB (weights %.1f MiB, KV cache %.1f MiB at max_batch x max_context)",
                result.value("ttft_ms", 0.0), result.value("tpot_ms", 0.0), double(r.peak_rss_kb) / 1024.0,
                double(store.total_bytes()) / (1024.0 * 1024.0), kv_mb);
  g.summary = line;
  return g;
}

}  // namespace mi::gates
