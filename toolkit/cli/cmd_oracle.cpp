// `metainfer oracle`: greedy generation with the acceptance oracle (toolkit/oracle), the plain double-precision
// reference forward pass the gates compare engines with when no golden trace exists for a checkpoint.
#include <charconv>
#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/error.h"
#include "oracle/reference_forward.h"

namespace mi::cli {

namespace {

// "1, 2,3" -> {1, 2, 3}. Each item must be a whole decimal integer; at least one.
std::vector<int> parse_prompt_ids(const std::string& text) {
  std::vector<int> ids;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const size_t first = item.find_first_not_of(" \t\r\n");
    const size_t last = item.find_last_not_of(" \t\r\n");
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    int value = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size())
      fail("--prompt-ids: '", item, "' is not a token id (expected comma-separated integers, e.g. 9707,11,1879)");
    ids.push_back(value);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

}  // namespace

void register_oracle_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("oracle", "Greedy ids from the reference forward pass (the acceptance oracle)");
  cmd->footer(
      "Runs the plain double-precision reference forward (toolkit/oracle; Qwen3ForCausalLM, LlamaForCausalLM,\n"
      "Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration (text only) and Qwen3NextForCausalLM)\n"
      "on a Hugging Face checkpoint: prefill of the prompt ids, then --max-new-tokens greedy steps.\n"
      "Prints one line per step (id, margin = top-1 minus top-2 logit, runner-up id), or with --json one line\n"
      "{\"output_ids\": [...], \"margins\": [...], \"runner_up_ids\": [...]}.\n"
      "Exit status: 0 ok; 2 bad input (flags, a checkpoint the oracle cannot load: the message names the file and\n"
      "the field or tensor).");
  struct Options {
    std::string model, prompt_ids;
    int max_new_tokens = 16;
    int threads = 0;
    bool json = false;
    bool int8 = false;
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("--model", opts->model, "Hugging Face checkpoint directory (config.json + *.safetensors)")
      ->required();
  cmd->add_option("--prompt-ids", opts->prompt_ids, "comma-separated prompt token ids, e.g. 9707,11,1879")
      ->required();
  cmd->add_option("--max-new-tokens", opts->max_new_tokens, "greedy steps (default 16)");
  cmd->add_option("--threads", opts->threads, "threads (default 0: every CPU)");
  cmd->add_flag("--json", opts->json, "print one JSON line");
  cmd->add_flag("--int8", opts->int8,
                "projections and LM head quantised as an int8 engine computes with them (ckb/contracts/int8_weights.toml; "
                "dense families only)");
  cmd->callback([opts, &exit_code] {
    if (opts->max_new_tokens < 0) fail("--max-new-tokens: expected a non-negative integer, got ", opts->max_new_tokens);
    if (opts->threads < 0) fail("--threads: expected a non-negative integer, got ", opts->threads);
    const std::vector<int> prompt = parse_prompt_ids(opts->prompt_ids);
    const int threads =
        opts->threads > 0 ? opts->threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<oracle::GreedyStep> steps;
    try {
      const oracle::ReferenceModel model(opts->model, threads,
                                         opts->int8 ? oracle::WeightQuantization::int8_per_row : oracle::WeightQuantization::none);
      steps = oracle::greedy(model, prompt, opts->max_new_tokens);
    } catch (const oracle::OracleError& e) {
      fail(e.what());  // bad input: exit 2 with the oracle's message (it names the file and field or tensor)
    }
    if (opts->json) {
      nlohmann::json ids = nlohmann::json::array(), margins = nlohmann::json::array(),
                     runners = nlohmann::json::array();
      for (const oracle::GreedyStep& s : steps) {
        ids.push_back(s.id);
        margins.push_back(s.margin);
        runners.push_back(s.runner_up);
      }
      std::cout << nlohmann::json{{"output_ids", ids}, {"margins", margins}, {"runner_up_ids", runners}}.dump()
                << "\n";
    } else {
      std::cout << "step\tid\tmargin\trunner_up\n";
      for (size_t i = 0; i < steps.size(); ++i) {
        char margin[32];
        std::snprintf(margin, sizeof margin, "%.6g", steps[i].margin);
        std::cout << i << "\t" << steps[i].id << "\t" << margin << "\t" << steps[i].runner_up << "\n";
      }
    }
    exit_code = kExitOk;
  });
}

}  // namespace mi::cli
