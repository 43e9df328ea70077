// The command line every generated engine shares (README.md in this directory is the user's guide):
//
//   ENGINE generate --model DIR (--prompt TEXT | --prompt-ids 1,2,3) [--chat] [--max-new-tokens N]
//                   [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R] [--seed S]
//                   [--stop S]... [--mode precise|fast] [--threads N] [--json]
//   ENGINE chat --model DIR [--max-new-tokens N] [sampling flags] [--stop S]... [--mode ...] [--threads N]
//   (`chat` and `--chat` only in engines generated with runtime.chat = true: engine/chat_commands.h; the others
//   refuse them with exit 2 and say how to get them)
//   ENGINE score --model DIR --prompt-ids 1,2,3 --logits-out FILE [--mode precise|fast] [--threads N]
//                [--prefill-chunk N]      (teacher-forced logits of every position, raw little-endian f32 [n, vocab])
//   ENGINE bench --model DIR [--matrix paper|quick] [--runs N] [--threads T] [--batch 1,2,4,8] [--max-batch B]
//                [--profile] [--json FILE] ...   (in-process benchmark, engine/bench.h lists every flag)
//   ENGINE --version [--json]
//
// Exit status: 0 success; 2 bad input (unknown flag, malformed or out-of-range value, a prompt the model cannot
// take, a text prompt for a checkpoint without tokenizer.json, a checkpoint for another model, a tokenizer.json or
// chat template that cannot be loaded or rendered: the message names the file); 1 a runtime failure (unreadable
// checkpoint, model error, standard output that cannot be written: "cannot write to standard output", a checkpoint
// file changed while mapped). Every failure prints one message on the error stream; nothing is allowed to crash.
//
// Written against the EngineModel concept only: engine_main.cpp instantiates it with the generated engine::Model,
// tests with a model assembled from the components.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "common/error.h"
#include "common/output_check.h"
#include "engine/bench.h"
#include "engine/generation.h"
#include "engine/model_interface.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace mi::engine {

// What the engine was built as (engine_main.cpp fills it from the generated engine_config.h and the build's
// METAINFER_MANIFEST_SHA256 / METAINFER_VERSION).
struct EngineInfo {
  std::string engine_name;
  std::string architecture;
  std::string family;
  std::string kernel_level;
  std::string manifest_sha256;
  std::string metainfer_version;
  int threads = 1;
  int max_batch = 1;
  int max_context = 512;
  int kv_block_size = 16;
  int kv_blocks = 0;  // KV pool blocks (runtime.kv_blocks); 0 = max_batch x max_context worth
  int chunked_prefill = 0;
  int vocab_size = 0;  // 0 = unknown until the model is loaded
  bool fast_numerics_default = false;
  std::string weight_dtype;  // "bf16", "f32", ... (bench --profile counts weight bytes by it)
};

// A subcommand an engine adds beyond the shared ones because its constraints ask for it (e.g. `serve` for
// runtime.mode = "serve"): registered on the app before parsing, run when it was the command given.
struct ExtraCommand {
  CLI::App* command = nullptr;
  std::function<int()> run;
};

// The extra commands of an engine whose constraints ask for none. An engine's generated engine_features.h names
// the type whose add<M>(app, info, out, err) registers its extra commands.
struct NoExtraCommands {
  template <class M>
  static std::vector<ExtraCommand> add(CLI::App&, const EngineInfo&, std::ostream&, std::ostream&) {
    return {};
  }
};

// Why `chat` and `--chat` are refused by an engine built without the chat template interpreter.
inline constexpr const char* kNoChatMessage =
    "this engine has no chat template interpreter (it was generated without runtime.chat = true); give the prompt as "
    "plain text with --prompt, or regenerate the engine with `chat = true` in [runtime] (or --chat on)";

// The chat support of an engine whose constraints do not ask for chat: `chat` and `--chat` are refused with
// kNoChatMessage (exit 2). Engines with chat name engine/chat_commands.h's ChatTemplateCommands instead.
struct NoChat {
  static constexpr bool available = false;
};

// Generated tokens when --max-new-tokens is not given (capped by what is left of max_context).
inline constexpr int kDefaultMaxNewTokens = 256;

// Bad input: reported with exit status 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

// Loading the checkpoint: a missing or mis-shaped tensor or a config for another model is bad input (exit 2),
// reported before any compute.
template <EngineModel M>
M load_model(const std::string& model_dir, const RuntimeOptions& options) {
  try {
    return M(model_dir, options);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

// The output stream failed (a full disk, a closed stdout, a reader that went away): exit 1, never a silent 0.
class OutputError : public Error {
 public:
  using Error::Error;
};

// After a write to `out`: OutputError when it did not reach the stream. `error` is errno right after the write.
inline void check_output(const std::ostream& out, int error) {
  if (!out) throw OutputError(std::string("cannot write to standard output") + (error ? ": " + std::string(std::strerror(error)) : ""));
}

// A tokenizer or chat-template failure is bad input naming the file: messages that do not name it get it prefixed.
inline std::string naming_file(const std::string& message, const std::filesystem::path& file) {
  if (message.find("tokenizer.json") != std::string::npos || message.find("tokenizer_config.json") != std::string::npos)
    return message;
  return file.string() + ": " + message;
}

template <class... Parts>
[[noreturn]] void usage_fail(const Parts&... parts) {
  try {
    fail(parts...);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

// "1,2,3" -> ids. Spaces around an id are allowed; every id must be a decimal integer in [0, 2^31).
inline std::vector<int32_t> parse_prompt_ids(std::string_view text) {
  std::vector<int32_t> ids;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = text.find(',', pos);
    std::string_view item = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    int32_t id = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || item.front() == '-' || id < 0)
      usage_fail("--prompt-ids: '", std::string(item), "' is not a token id (expected comma-separated integers ",
                 ">= 0, e.g. 1,2,3)");
    ids.push_back(id);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return ids;
}

namespace cli_detail {

struct Options {
  std::string model_dir;
  std::string prompt;
  std::string prompt_ids;
  bool use_prompt_ids = false;  // --prompt-ids given (else --prompt)
  bool chat_format = false;
  int max_new_tokens = -1;  // -1: not given
  bool max_new_tokens_given = false;
  runtime::SamplingParams sampling;
  std::vector<std::string> stop;
  std::string mode;
  int threads = 0;
  int prefill_chunk = 0;  // 0: the engine's compiled default (runtime.chunked_prefill, else the whole prompt)
  bool json = false;
  std::string logits_out;  // score: where the logits go
};

inline void add_common_flags(CLI::App& cmd, Options& o) {
  cmd.add_option("--model", o.model_dir, "checkpoint directory (config.json, *.safetensors, tokenizer files)")
      ->required();
  cmd.add_option("--max-new-tokens", o.max_new_tokens,
                 "tokens to generate at most (default: " + std::to_string(kDefaultMaxNewTokens) +
                     ", capped by the context left)");
  cmd.add_option("--temperature", o.sampling.temperature, "0 = greedy (default)");
  cmd.add_option("--top-k", o.sampling.top_k, "keep the K most likely tokens (0 = off)");
  cmd.add_option("--top-p", o.sampling.top_p, "nucleus sampling mass in (0, 1] (1 = off)");
  cmd.add_option("--min-p", o.sampling.min_p, "drop tokens below P x the top probability, [0, 1) (0 = off)");
  cmd.add_option("--repetition-penalty", o.sampling.repetition_penalty, "> 0 (1 = off)");
  cmd.add_option("--seed", o.sampling.seed, "random seed for sampling (default 0)");
  cmd.add_option("--stop", o.stop, "stop when this text is generated (not included in the output); repeatable");
  cmd.add_option("--mode", o.mode, "numerics: precise (f32 activations) or fast (bf16 activations)")
      ->check(CLI::IsMember({"precise", "fast"}));
  cmd.add_option("--threads", o.threads, "worker threads");
  cmd.add_option("--prefill-chunk", o.prefill_chunk,
                 "prompt tokens per prefill step (default: the engine's runtime.chunked_prefill, else all at once)");
}

// The most tokens one forward step may take: the scratch is sized for the compiled chunk, else max_context.
inline int max_step_tokens(const EngineInfo& info) {
  return info.chunked_prefill > 0 ? std::min(info.chunked_prefill, info.max_context) : info.max_context;
}

inline void check_common(const Options& o, const EngineInfo& info) {
  try {
    runtime::validate(o.sampling);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (o.max_new_tokens_given && o.max_new_tokens < 0)
    usage_fail("--max-new-tokens: expected an integer >= 0, got ", o.max_new_tokens);
  if (o.threads < 1) usage_fail("--threads: expected an integer >= 1, got ", o.threads);
  if (o.prefill_chunk < 0 || o.prefill_chunk > max_step_tokens(info))
    usage_fail("--prefill-chunk: expected 1..", max_step_tokens(info), " (the engine's scratch holds ",
               max_step_tokens(info), " tokens per step), got ", o.prefill_chunk);
  for (const std::string& s : o.stop)
    if (s.empty()) usage_fail("--stop: the stop string must not be empty");
  std::error_code ec;
  if (!std::filesystem::is_directory(o.model_dir, ec))
    usage_fail("--model: '", o.model_dir, "' is not a directory");
}

inline bool has_tokenizer(const std::string& model_dir) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::path(model_dir) / "tokenizer.json", ec);
}

inline void require_tokenizer(const std::string& model_dir, const std::string& what) {
  if (!has_tokenizer(model_dir))
    usage_fail(what, " needs a tokenizer, but the checkpoint '", model_dir,
               "' has no tokenizer.json; give the prompt as token ids with --prompt-ids");
}

inline tok::Tokenizer load_tokenizer(const std::string& model_dir) {
  try {
    return tok::Tokenizer::load(model_dir);
  } catch (const std::exception& e) {
    throw UsageError(naming_file(e.what(), std::filesystem::path(model_dir) / "tokenizer.json"));
  }
}

inline RuntimeOptions runtime_options(const Options& o, const EngineInfo& info) {
  RuntimeOptions r;
  r.threads = o.threads;
  r.max_batch = 1;  // the command line runs one request at a time
  r.max_context = info.max_context;
  r.kv_block_size = info.kv_block_size;
  r.fast = o.mode == "fast";
  return r;
}

inline GenerationLimits generation_limits(const EngineInfo& info, const Options& o) {
  return {info.max_context, o.prefill_chunk > 0 ? o.prefill_chunk : info.chunked_prefill};
}

inline void check_ids(const std::vector<int32_t>& ids, int vocab_size) {
  if (vocab_size <= 0) return;
  for (const int32_t id : ids)
    if (id >= vocab_size) usage_fail("prompt token id ", id, " is outside the vocabulary [0, ", vocab_size, ")");
}

// max_new_tokens for a prompt of `prompt_tokens`: the flag's value, or the default capped by the context left.
// UsageError (naming both numbers) when the request cannot fit max_context.
inline int budget(const Options& o, const EngineInfo& info, std::size_t prompt_tokens) {
  const long long prompt = (long long)prompt_tokens;
  if (o.max_new_tokens_given) {
    if (prompt + o.max_new_tokens > info.max_context)
      usage_fail("prompt of ", prompt, " tokens + --max-new-tokens ", o.max_new_tokens, " = ",
                 prompt + o.max_new_tokens, " tokens exceeds the engine's max_context of ", info.max_context);
    return o.max_new_tokens;
  }
  if (prompt >= info.max_context)
    usage_fail("prompt of ", prompt, " tokens leaves no room to generate within the engine's max_context of ",
               info.max_context);
  return int(std::min<long long>(kDefaultMaxNewTokens, info.max_context - prompt));
}

inline void print_version(const EngineInfo& info, bool json, std::ostream& out) {
  if (json) {
    nlohmann::ordered_json j;
    j["manifest_sha256"] = info.manifest_sha256;
    j["engine"] = info.engine_name;
    j["architecture"] = info.architecture;
    j["family"] = info.family;
    j["kernel_level"] = info.kernel_level;
    j["metainfer_version"] = info.metainfer_version;
    out << j.dump() << "\n";
  } else {
    out << info.engine_name << " (" << info.architecture << ", " << info.family << ", kernel level "
        << info.kernel_level << "), generated by metainfer " << info.metainfer_version << ", manifest sha256 "
        << info.manifest_sha256 << "\n";
  }
}

inline std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

template <EngineModel M, class Chat>
int run_generate(const EngineInfo& info, const Options& o, std::ostream& out) {
  const bool text_prompt = !o.use_prompt_ids;
  if (o.chat_format && !Chat::available) usage_fail("--chat: ", kNoChatMessage);
  if (o.use_prompt_ids && o.chat_format)
    usage_fail("--chat wraps a text --prompt in the chat template; it cannot be used with --prompt-ids");
  std::vector<int32_t> prompt_ids;
  if (!text_prompt) prompt_ids = parse_prompt_ids(o.prompt_ids);
  const bool tokenizer_needed = text_prompt || !o.stop.empty();
  if (text_prompt) require_tokenizer(o.model_dir, o.chat_format ? "--chat" : "--prompt");
  if (!o.stop.empty()) require_tokenizer(o.model_dir, "--stop");

  std::optional<tok::Tokenizer> tokenizer;
  if (tokenizer_needed || has_tokenizer(o.model_dir)) tokenizer.emplace(load_tokenizer(o.model_dir));
  if (text_prompt) {
    if (o.chat_format) {
      if constexpr (Chat::available) prompt_ids = Chat::encode_user_prompt(o.model_dir, *tokenizer, o.prompt);
    } else {
      try {
        prompt_ids = tokenizer->encode(o.prompt, true);
      } catch (const Error& e) {
        throw UsageError(std::string("--prompt: ") + e.what());
      }
    }
  }
  if (prompt_ids.empty()) usage_fail("the prompt is empty (it encodes to no tokens)");
  check_ids(prompt_ids, info.vocab_size);
  GenerationRequest request;
  request.prompt_ids = prompt_ids;
  request.sampling = o.sampling;
  request.stop = o.stop;
  request.max_new_tokens = budget(o, info, prompt_ids.size());

  M model = load_model<M>(o.model_dir, runtime_options(o, info));
  check_ids(prompt_ids, model.vocab_size());

  GenerationCallbacks callbacks;
  bool first_id = true;
  if (!o.json) {
    if (tokenizer) {
      callbacks.on_text = [&](std::string_view text) {
        errno = 0;
        out << text << std::flush;
        check_output(out, errno);
      };
    } else {
      callbacks.on_token = [&](int32_t id) {
        errno = 0;
        out << (first_id ? "" : ",") << id << std::flush;
        check_output(out, errno);
        first_id = false;
      };
    }
  }
  const GenerationResult r = generate(model, tokenizer ? &*tokenizer : nullptr, generation_limits(info, o), request, callbacks);
  if (!o.json) {
    out << "\n" << std::flush;
    return 0;
  }
  nlohmann::ordered_json j;
  j["prompt_ids"] = r.prompt_ids;
  j["output_ids"] = r.output_ids;
  j["text"] = r.text;
  j["finish_reason"] = runtime::to_string(r.finish_reason);
  j["ttft_ms"] = r.ttft_ms;
  j["tpot_ms"] = r.tpot_ms;
  j["prompt_tokens"] = r.prompt_ids.size();
  j["completion_tokens"] = r.output_ids.size();
  j["mode"] = o.mode;
  j["kernel_level"] = std::string(ModelFacts(model.facts()).kernel_level);
  j["threads"] = o.threads;
  j["tokenizer"] = tokenizer.has_value();
  out << dump_json(j) << "\n" << std::flush;
  return 0;
}

// Teacher-forced scoring: the ids are fed in prefill steps of --prefill-chunk tokens (the compiled default when not
// given) and the logits of every position are written to --logits-out as raw little-endian f32, row-major
// [n, vocab] (row j is the distribution after ids[0..j]). The gates compare them with the acceptance oracle.
template <EngineModel M>
int run_score(const EngineInfo& info, const Options& o, std::ostream& out) {
  const std::vector<int32_t> ids = parse_prompt_ids(o.prompt_ids);
  check_ids(ids, info.vocab_size);
  if (static_cast<long long>(ids.size()) > info.max_context)
    usage_fail("score: ", ids.size(), " ids exceed the engine's max_context of ", info.max_context);
  std::FILE* file = std::fopen(o.logits_out.c_str(), "wb");
  if (!file) usage_fail("--logits-out: cannot create '", o.logits_out, "'");
  M model = load_model<M>(o.model_dir, runtime_options(o, info));
  const int vocab = model.vocab_size();
  const int chunk = o.prefill_chunk > 0 ? o.prefill_chunk : max_step_tokens(info);
  std::vector<float> logits(std::size_t(std::min<std::size_t>(std::size_t(chunk), ids.size())) * std::size_t(vocab));
  const int seq = model.new_sequence();
  bool written = true;
  for (std::size_t first = 0; first < ids.size(); first += std::size_t(chunk)) {
    const int n = int(std::min<std::size_t>(std::size_t(chunk), ids.size() - first));
    model.forward(seq, ids.data() + first, n, logits.data(), true);
    written = written && std::fwrite(logits.data(), sizeof(float), std::size_t(n) * std::size_t(vocab), file) ==
                             std::size_t(n) * std::size_t(vocab);
  }
  model.free_sequence(seq);
  written = std::fclose(file) == 0 && written;
  if (!written) fail("--logits-out: writing '", o.logits_out, "' failed");
  nlohmann::ordered_json j;
  j["tokens"] = ids.size();
  j["vocab"] = vocab;
  j["logits_out"] = o.logits_out;
  j["dtype"] = "f32";
  j["mode"] = o.mode;
  j["prefill_chunk"] = chunk;
  out << dump_json(j) << "\n" << std::flush;
  return 0;
}

inline std::vector<int> parse_int_list(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size())
      usage_fail(flag, ": '", item, "' is not an integer (expected a comma-separated list, e.g. 1,2,4,8)");
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// `bench`: engine/bench.h. The report goes to --json (when given) and, as one JSON line, to `out`.
template <EngineModel M>
int run_bench(const EngineInfo& info, const Options& o, BenchSettings bs, const std::string& prompts,
              const std::string& gens, const std::string& batch, const std::string& parts, std::ostream& out,
              std::ostream& err) {
  if (!prompts.empty()) bs.prompts = parse_int_list("--prompts", prompts);
  if (!gens.empty()) bs.gens = parse_int_list("--gens", gens);
  if (!batch.empty()) bs.batch = parse_int_list("--batch", batch);
  if (!parts.empty()) {
    bs.parts.clear();
    std::stringstream ss(parts);
    for (std::string p; std::getline(ss, p, ',');) bs.parts.push_back(p);
  }
  const int max_step = max_step_tokens(info);
  BenchPlan plan;
  try {
    plan = plan_bench(bs, info.max_context);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  std::ofstream json_file;
  if (!bs.json_path.empty()) {
    json_file.open(bs.json_path);
    if (!json_file) usage_fail("--json: cannot create '", bs.json_path, "'");
  }
  OpCostModel cost;
  try {
    const io::ModelConfig c = io::load_model_config(o.model_dir);
    cost = {c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads,
            c.num_key_value_heads, c.head_dim, OpCostModel::bytes_per_weight(info.weight_dtype)};
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  auto make_model = [&](int max_batch, int max_context) {
    RuntimeOptions r = runtime_options(o, info);
    r.max_batch = max_batch;
    r.max_context = max_context;
    r.kv_block_size = std::min(info.kv_block_size, max_context);
    return load_model<M>(o.model_dir, r);
  };
  nlohmann::ordered_json report =
      run_engine_bench<M>(bs, plan, cost, info.max_context, max_step, o.threads, make_model, err);
  report["engine"] = {{"name", info.engine_name},         {"kernel_level", info.kernel_level},
                      {"max_context", info.max_context},  {"chunked_prefill", info.chunked_prefill},
                      {"max_batch", info.max_batch},      {"weight_dtype", info.weight_dtype},
                      {"mode", o.mode}};
  const std::string text = dump_json(report);
  if (json_file.is_open()) {
    json_file << report.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    json_file.close();
    if (!json_file) fail("--json: writing '", bs.json_path, "' failed");
  }
  errno = 0;
  out << text << "\n" << std::flush;
  check_output(out, errno);
  return 0;
}

}  // namespace cli_detail

// Parses the command line and runs it; returns the process exit status. Output goes to `out`, messages to `err`,
// chat turns are read from `in`. run_engine_cli below adds the final check of `out`.
template <EngineModel M, class Extras = NoExtraCommands, class Chat = NoChat>
int run_engine_cli_unchecked(const EngineInfo& info, int argc, const char* const* argv, std::istream& in,
                             std::ostream& out, std::ostream& err) {
  using namespace cli_detail;
  CLI::App app{info.engine_name + ": a metainfer-generated inference engine for " + info.architecture +
               " (kernel level " + info.kernel_level + ")"};
  app.name(info.engine_name);
  bool version = false, version_json = false;
  app.add_flag("--version", version, "print what this engine was built as and exit");
  app.add_flag("--json", version_json, "with --version: print it as one JSON object");

  Options o;
  o.threads = info.threads;
  o.mode = info.fast_numerics_default ? "fast" : "precise";

  CLI::App* gen = app.add_subcommand("generate", "generate a completion for one prompt");
  add_common_flags(*gen, o);
  CLI::Option* prompt = gen->add_option("--prompt", o.prompt, "prompt text (needs tokenizer.json)");
  CLI::Option* prompt_ids = gen->add_option("--prompt-ids", o.prompt_ids, "prompt as token ids: 1,2,3 (fed as given)");
  prompt->excludes(prompt_ids);
  gen->add_flag("--chat", o.chat_format,
                std::string("wrap --prompt as a user message in the model's chat template") +
                    (Chat::available ? "" : " (not in this engine: generated without runtime.chat)"));
  gen->add_flag("--json", o.json, "print one JSON object with ids, text, finish reason and timings");

  CLI::App* chat = app.add_subcommand("chat", std::string("interactive multi-turn chat on stdin/stdout (/exit or EOF ends it)") +
                                                  (Chat::available ? "" : " (not in this engine: generated without runtime.chat)"));
  add_common_flags(*chat, o);

  CLI::App* score = app.add_subcommand("score", "teacher-forced logits of every position of --prompt-ids (f32 file)");
  score->add_option("--model", o.model_dir, "checkpoint directory (config.json, *.safetensors)")->required();
  score->add_option("--prompt-ids", o.prompt_ids, "the ids to score: 1,2,3")->required();
  score->add_option("--logits-out", o.logits_out, "file for the logits: raw little-endian f32 [n, vocab]")->required();
  score->add_option("--mode", o.mode, "numerics: precise or fast")->check(CLI::IsMember({"precise", "fast"}));
  score->add_option("--threads", o.threads, "worker threads");
  score->add_option("--prefill-chunk", o.prefill_chunk, "ids per forward step (default: the engine's maximum)");
  CLI::App* bench = app.add_subcommand("bench", "measure this engine in-process: matrix, batch scaling, chunked prefill, --profile");
  BenchSettings bs;
  std::string bench_prompts, bench_gens, bench_batch, bench_parts;
  bench->add_option("--model", o.model_dir, "checkpoint directory (config.json, *.safetensors)")->required();
  bench->add_option("--matrix", bs.matrix, "paper (prompts 11,256,1021 x gens 256,1024,2048) or quick (11,64 x 16,32)")
      ->check(CLI::IsMember({"paper", "quick"}));
  bench->add_option("--prompts", bench_prompts, "prompt lengths replacing the matrix's: 11,64");
  bench->add_option("--gens", bench_gens, "generation lengths replacing the matrix's: 16,32");
  bench->add_option("--runs", bs.runs, "measured runs per cell (mean +- stddev; default 3)");
  bench->add_option("--warmup", bs.warmup, "unmeasured runs before them (default 1)");
  bench->add_option("--threads", o.threads, "worker threads");
  bench->add_option("--mode", o.mode, "numerics: precise or fast")->check(CLI::IsMember({"precise", "fast"}));
  bench->add_option("--batch", bench_batch, "batch sizes of the batch-scaling study (default 1,2,4,8)");
  bench->add_option("--batch-prompt", bs.batch_prompt, "prompt tokens per sequence there (default: the shortest prompt)");
  bench->add_option("--batch-gen", bs.batch_gen, "decode steps there (default: the shortest generation)");
  bench->add_option("--max-batch", bs.max_batch, "sequences the model holds at once (default: the largest --batch)");
  bench->add_option("--parts", bench_parts, "what to run: a subset of matrix,batch,chunked,profile (default matrix,batch,chunked; --profile adds profile)");
  bench->add_flag("--profile", bs.profile, "per-op time of one decode step and one prefill, with bytes, FLOPs and bounds");
  bench->add_option("--profile-prompt", bs.profile_prompt, "prefill length of the profile (default 256)");
  bench->add_option("--bandwidth-gbs", bs.bandwidth_gbs, "memory bandwidth bound for the profile's fractions");
  bench->add_option("--peak-gflops", bs.peak_gflops, "compute bound for the profile's fractions");
  bench->add_option("--json", bs.json_path, "write the report (metainfer-bench/1) to this file");
  const std::vector<ExtraCommand> extras = Extras::template add<M>(app, info, out, err);
  app.require_subcommand(0, 1);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    return code == 0 ? 0 : 2;
  }
  try {
    if (version) {
      print_version(info, version_json, out);
      return 0;
    }
    if (version_json) usage_fail("--json before the command is only for --version; write 'generate ... --json'");
    for (const ExtraCommand& extra : extras)
      if (extra.command->parsed()) return extra.run();
    if (score->parsed()) {
      check_common(o, info);
      return run_score<M>(info, o, out);
    }
    if (bench->parsed()) {
      check_common(o, info);
      bs.model_dir = o.model_dir;
      return run_bench<M>(info, o, bs, bench_prompts, bench_gens, bench_batch, bench_parts, out, err);
    }
    o.max_new_tokens_given = (gen->parsed() ? gen : chat)->count("--max-new-tokens") > 0;
    if (gen->parsed()) {
      check_common(o, info);
      if (prompt->count() == 0 && prompt_ids->count() == 0) usage_fail("generate: give --prompt TEXT or --prompt-ids IDS");
      if (prompt_ids->count() > 0 && o.prompt_ids.empty()) usage_fail("--prompt-ids: no ids given");
      if (prompt->count() > 0 && o.prompt.empty()) usage_fail("--prompt: the prompt is empty");
      o.use_prompt_ids = prompt_ids->count() > 0;
      return run_generate<M, Chat>(info, o, out);
    }
    if (chat->parsed()) {
      if constexpr (!Chat::available) {
        usage_fail("chat: ", kNoChatMessage);
      } else {
        check_common(o, info);
        return Chat::template run<M>(info, o, in, out, err);
      }
    }
    err << app.help();
    return 2;
  } catch (const UsageError& e) {
    err << info.engine_name << ": " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << info.engine_name << ": error: " << e.what() << "\n";
    return 1;
  } catch (...) {
    err << info.engine_name << ": error: unknown failure\n";
    return 1;
  }
}

// The command line with its output checked: everything written to `out` must reach it (flushed at the end), else
// "cannot write to standard output" and exit 1 (a failure reported during the run keeps its own status).
template <EngineModel M, class Extras = NoExtraCommands, class Chat = NoChat>
int run_engine_cli(const EngineInfo& info, int argc, const char* const* argv, std::istream& in, std::ostream& out,
                   std::ostream& err) {
  const int status = run_engine_cli_unchecked<M, Extras, Chat>(info, argc, argv, in, out, err);
  errno = 0;
  out.flush();
  if (out || status != 0) return status;
  const int error = errno ? errno : &out == &std::cout ? probe_standard_output() : 0;
  err << info.engine_name << ": error: cannot write to standard output"
      << (error ? ": " + std::string(std::strerror(error)) : std::string()) << "\n";
  return kExitOutputFailure;
}

template <EngineModel M, class Extras = NoExtraCommands, class Chat = NoChat>
int run_engine_cli(const EngineInfo& info, int argc, const char* const* argv) {
  return run_engine_cli<M, Extras, Chat>(info, argc, argv, std::cin, std::cout, std::cerr);
}

}  // namespace mi::engine
