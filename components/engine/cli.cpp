// The model-independent half of the engine's command line (engine/cli.h): the command line built and parsed with
// CLI11, the checks, the preparation of each command up to loading the model and the output after it. Compiled once
// into engine_core: every engine has the same copy, so ccache reuses the object across engines, while the model's
// translation unit (engine_main.cpp) holds only the dispatch.
#include "engine/cli.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "io/model_config.h"

namespace mi::engine {

void check_output(const std::ostream& out, int error) {
  if (!out) throw OutputError(std::string("cannot write to standard output") + (error ? ": " + std::string(std::strerror(error)) : ""));
}

std::string naming_file(const std::string& message, const std::filesystem::path& file) {
  if (message.find("tokenizer.json") != std::string::npos || message.find("tokenizer_config.json") != std::string::npos)
    return message;
  return file.string() + ": " + message;
}

std::vector<int32_t> parse_prompt_ids(std::string_view text) {
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

int check_final_output(const EngineInfo& info, int status, std::ostream& out, std::ostream& err) {
  errno = 0;
  out.flush();
  if (out || status != 0) return status;
  const int error = errno ? errno : &out == &std::cout ? probe_standard_output() : 0;
  err << info.engine_name << ": error: cannot write to standard output"
      << (error ? ": " + std::string(std::strerror(error)) : std::string()) << "\n";
  return kExitOutputFailure;
}

namespace cli_detail {
namespace {

void add_common_flags(CLI::App& cmd, Options& o) {
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

void check_common(const Options& o, const EngineInfo& info) {
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

void print_version(const EngineInfo& info, bool json, std::ostream& out) {
  if (json) {
    nlohmann::ordered_json j;
    j["manifest_sha256"] = info.manifest_sha256;
    j["engine"] = info.engine_name;
    j["architecture"] = info.architecture;
    j["family"] = info.family;
    j["kernel_level"] = info.kernel_level;
    j["metainfer_version"] = info.metainfer_version;
    // What the engine was planned as (README "Numerics and threads"): the default --mode, the KV cache element in
    // fast numerics (runtime.kv_dtype) and the stored weight dtype.
    j["default_mode"] = info.fast_numerics_default ? "fast" : "precise";
    j["fast_kv_dtype"] = info.bf16_kv_in_fast ? "bf16" : "f32";
    j["weight_dtype"] = info.weight_dtype;
    out << j.dump() << "\n";
  } else {
    out << info.engine_name << " (" << info.architecture << ", " << info.family << ", kernel level "
        << info.kernel_level << "), generated by metainfer " << info.metainfer_version << ", manifest sha256 "
        << info.manifest_sha256 << "\n"
        << "default mode " << (info.fast_numerics_default ? "fast" : "precise") << "; KV cache in fast mode "
        << (info.bf16_kv_in_fast ? "bf16" : "f32") << "; weights " << (info.weight_dtype.empty() ? "?" : info.weight_dtype)
        << "\n";
  }
}

std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::vector<int> parse_int_list(const std::string& flag, const std::string& text) {
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

}  // namespace

CommandLine parse_command_line(const EngineInfo& info, bool chat_available, const std::vector<ExtraCommand>& extras,
                               int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CommandLine cl;
  Options& o = cl.options;
  BenchSettings& bs = cl.bench;
  CLI::App app{info.engine_name + ": a metainfer-generated inference engine for " + info.architecture +
               " (kernel level " + info.kernel_level + ")"};
  app.name(info.engine_name);
  bool version = false, version_json = false;
  app.add_flag("--version", version, "print what this engine was built as and exit");
  app.add_flag("--json", version_json, "with --version: print it as one JSON object");

  o.threads = info.threads;
  o.mode = info.fast_numerics_default ? "fast" : "precise";

  CLI::App* gen = app.add_subcommand("generate", "generate a completion for one prompt");
  add_common_flags(*gen, o);
  CLI::Option* prompt = gen->add_option("--prompt", o.prompt, "prompt text (needs tokenizer.json)");
  CLI::Option* prompt_ids = gen->add_option("--prompt-ids", o.prompt_ids, "prompt as token ids: 1,2,3 (fed as given)");
  prompt->excludes(prompt_ids);
  gen->add_flag("--chat", o.chat_format,
                std::string("wrap --prompt as a user message in the model's chat template") +
                    (chat_available ? "" : " (not in this engine: generated without runtime.chat)"));
  CLI::Option* gen_json = gen->add_flag("--json", o.json, "print one JSON object with ids, text, finish reason and timings");
  gen->add_flag("--mark-prompt-start", o.mark_prompt_start,
                "write '@' to stdout (flushed, before any output) when the model is loaded and the prompt starts: "
                "where a client's TTFT counts from (metainfer bench)")
      ->excludes(gen_json);

  CLI::App* chat = app.add_subcommand("chat", std::string("interactive multi-turn chat on stdin/stdout (/exit or EOF ends it)") +
                                                  (chat_available ? "" : " (not in this engine: generated without runtime.chat)"));
  add_common_flags(*chat, o);

  CLI::App* score = app.add_subcommand("score", "teacher-forced logits of every position of --prompt-ids (f32 file)");
  score->add_option("--model", o.model_dir, "checkpoint directory (config.json, *.safetensors)")->required();
  score->add_option("--prompt-ids", o.prompt_ids, "the ids to score: 1,2,3")->required();
  score->add_option("--logits-out", o.logits_out, "file for the logits: raw little-endian f32 [n, vocab]")->required();
  score->add_option("--mode", o.mode, "numerics: precise or fast")->check(CLI::IsMember({"precise", "fast"}));
  score->add_option("--threads", o.threads, "worker threads");
  score->add_option("--prefill-chunk", o.prefill_chunk, "ids per forward step (default: the engine's maximum)");
  CLI::App* bench = app.add_subcommand("bench", "measure this engine in-process: matrix, batch scaling, chunked prefill, --profile");
  bench->add_option("--model", o.model_dir, "checkpoint directory (config.json, *.safetensors)")->required();
  bench->add_option("--matrix", bs.matrix, "paper (prompts 11,256,1021 x gens 256,1024,2048) or quick (11,64 x 16,32)")
      ->check(CLI::IsMember({"paper", "quick"}));
  bench->add_option("--prompts", cl.bench_prompts, "prompt lengths replacing the matrix's: 11,64");
  bench->add_option("--gens", cl.bench_gens, "generation lengths replacing the matrix's: 16,32");
  bench->add_option("--runs", bs.runs, "measured runs per cell (mean +- stddev; default 3)");
  bench->add_option("--warmup", bs.warmup, "unmeasured runs before them (default 1)");
  bench->add_option("--threads", o.threads, "worker threads");
  bench->add_option("--mode", o.mode, "numerics: precise or fast")->check(CLI::IsMember({"precise", "fast"}));
  bench->add_option("--batch", cl.bench_batch, "batch sizes of the batch-scaling study (default 1,2,4,8)");
  bench->add_option("--batch-prompt", bs.batch_prompt, "prompt tokens per sequence there (default: the shortest prompt)");
  bench->add_option("--batch-gen", bs.batch_gen, "decode steps there (default: the shortest generation)");
  bench->add_option("--max-batch", bs.max_batch, "sequences the model holds at once (default: the largest --batch)");
  bench->add_option("--parts", cl.bench_parts, "what to run: a subset of matrix,batch,chunked,profile (default matrix,batch,chunked; --profile adds profile)");
  bench->add_flag("--profile", bs.profile, "per-op time of one decode step and one prefill, with bytes, FLOPs and bounds");
  bench->add_option("--profile-prompt", bs.profile_prompt, "prefill length of the profile (default 256)");
  bench->add_option("--bandwidth-gbs", bs.bandwidth_gbs, "memory bandwidth bound for the profile's fractions");
  bench->add_option("--peak-gflops", bs.peak_gflops, "compute bound for the profile's fractions");
  bench->add_option("--json", bs.json_path, "write the report (metainfer-bench/1) to this file");
  std::vector<CLI::App*> extra_commands;
  for (const ExtraCommand& extra : extras) extra_commands.push_back(extra.add(app));
  app.require_subcommand(0, 1);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    cl.status = code == 0 ? 0 : 2;
    return cl;
  }
  cl.status = run_reporting_errors(info, err, [&]() -> int {
    if (version) {
      print_version(info, version_json, out);
      return 0;
    }
    if (version_json) usage_fail("--json before the command is only for --version; write 'generate ... --json'");
    for (std::size_t i = 0; i < extra_commands.size(); ++i)
      if (extra_commands[i]->parsed()) {
        cl.command = Command::extra, cl.extra = i;
        return 0;
      }
    if (score->parsed()) {
      check_common(o, info);
      cl.command = Command::score;
      return 0;
    }
    if (bench->parsed()) {
      check_common(o, info);
      bs.model_dir = o.model_dir;
      cl.command = Command::bench;
      return 0;
    }
    o.max_new_tokens_given = (gen->parsed() ? gen : chat)->count("--max-new-tokens") > 0;
    if (gen->parsed()) {
      check_common(o, info);
      if (prompt->count() == 0 && prompt_ids->count() == 0) usage_fail("generate: give --prompt TEXT or --prompt-ids IDS");
      if (prompt_ids->count() > 0 && o.prompt_ids.empty()) usage_fail("--prompt-ids: no ids given");
      if (prompt->count() > 0 && o.prompt.empty()) usage_fail("--prompt: the prompt is empty");
      o.use_prompt_ids = prompt_ids->count() > 0;
      cl.command = Command::generate;
      return 0;
    }
    if (chat->parsed()) {
      if (!chat_available) usage_fail("chat: ", kNoChatMessage);
      check_common(o, info);
      cl.command = Command::chat;
      return 0;
    }
    err << app.help();
    return 2;
  });
  return cl;
}

int run_reporting_errors(const EngineInfo& info, std::ostream& err, const std::function<int()>& command) {
  try {
    return command();
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

int max_step_tokens(const EngineInfo& info) {
  return info.chunked_prefill > 0 ? std::min(info.chunked_prefill, info.max_context) : info.max_context;
}

bool has_tokenizer(const std::string& model_dir) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::path(model_dir) / "tokenizer.json", ec);
}

void require_tokenizer(const std::string& model_dir, const std::string& what) {
  if (!has_tokenizer(model_dir))
    usage_fail(what, " needs a tokenizer, but the checkpoint '", model_dir,
               "' has no tokenizer.json; give the prompt as token ids with --prompt-ids");
}

tok::Tokenizer load_tokenizer(const std::string& model_dir) {
  try {
    return tok::Tokenizer::load(model_dir);
  } catch (const std::exception& e) {
    throw UsageError(naming_file(e.what(), std::filesystem::path(model_dir) / "tokenizer.json"));
  }
}

RuntimeOptions runtime_options(const Options& o, const EngineInfo& info) {
  RuntimeOptions r;
  r.threads = o.threads;
  r.max_batch = 1;  // the command line runs one request at a time
  r.max_context = info.max_context;
  r.kv_block_size = info.kv_block_size;
  r.fast = o.mode == "fast";
  return r;
}

GenerationLimits generation_limits(const EngineInfo& info, const Options& o) {
  return {info.max_context, o.prefill_chunk > 0 ? o.prefill_chunk : info.chunked_prefill};
}

void check_ids(const std::vector<int32_t>& ids, int vocab_size) {
  if (vocab_size <= 0) return;
  for (const int32_t id : ids)
    if (id >= vocab_size) usage_fail("prompt token id ", id, " is outside the vocabulary [0, ", vocab_size, ")");
}

int budget(const Options& o, const EngineInfo& info, std::size_t prompt_tokens) {
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

PreparedGeneration prepare_generation(const EngineInfo& info, const Options& o, ChatPromptEncoder encode_chat) {
  const bool text_prompt = !o.use_prompt_ids;
  if (o.chat_format && !encode_chat) usage_fail("--chat: ", kNoChatMessage);
  if (o.use_prompt_ids && o.chat_format)
    usage_fail("--chat wraps a text --prompt in the chat template; it cannot be used with --prompt-ids");
  std::vector<int32_t> prompt_ids;
  if (!text_prompt) prompt_ids = parse_prompt_ids(o.prompt_ids);
  const bool tokenizer_needed = text_prompt || !o.stop.empty();
  if (text_prompt) require_tokenizer(o.model_dir, o.chat_format ? "--chat" : "--prompt");
  if (!o.stop.empty()) require_tokenizer(o.model_dir, "--stop");

  PreparedGeneration g;
  std::optional<tok::Tokenizer>& tokenizer = g.tokenizer;
  if (tokenizer_needed || has_tokenizer(o.model_dir)) tokenizer.emplace(load_tokenizer(o.model_dir));
  if (text_prompt) {
    if (o.chat_format) {
      prompt_ids = encode_chat(o.model_dir, *tokenizer, o.prompt);
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
  GenerationRequest& request = g.request;
  request.prompt_ids = prompt_ids;
  request.sampling = o.sampling;
  request.stop = o.stop;
  request.max_new_tokens = budget(o, info, prompt_ids.size());
  return g;
}

GenerationCallbacks streaming_callbacks(const Options& o, bool tokenizer, std::ostream& out) {
  GenerationCallbacks callbacks;
  if (o.json) return callbacks;
  if (o.mark_prompt_start) {
    callbacks.on_prompt_start = [&out] {
      errno = 0;
      out << '@' << std::flush;
      check_output(out, errno);
    };
  }
  if (tokenizer) {
    callbacks.on_text = [&out](std::string_view text) {
      errno = 0;
      out << text << std::flush;
      check_output(out, errno);
    };
  } else {
    auto first_id = std::make_shared<bool>(true);
    callbacks.on_token = [&out, first_id](int32_t id) {
      errno = 0;
      out << (*first_id ? "" : ",") << id << std::flush;
      check_output(out, errno);
      *first_id = false;
    };
  }
  return callbacks;
}

void print_generation(const Options& o, const GenerationResult& r, const std::string& kernel_level, bool tokenizer,
                      std::ostream& out) {
  if (!o.json) {
    out << "\n" << std::flush;
    return;
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
  j["kernel_level"] = kernel_level;
  j["threads"] = o.threads;
  j["tokenizer"] = tokenizer;
  out << dump_json(j) << "\n" << std::flush;
}

ScoreJob prepare_score(const EngineInfo& info, const Options& o) {
  ScoreJob job;
  job.ids = parse_prompt_ids(o.prompt_ids);
  check_ids(job.ids, info.vocab_size);
  if (static_cast<long long>(job.ids.size()) > info.max_context)
    usage_fail("score: ", job.ids.size(), " ids exceed the engine's max_context of ", info.max_context);
  job.file = std::fopen(o.logits_out.c_str(), "wb");
  if (!job.file) usage_fail("--logits-out: cannot create '", o.logits_out, "'");
  return job;
}

void finish_score(const Options& o, ScoreJob& job, bool written, int vocab, int chunk, std::ostream& out) {
  written = std::fclose(job.file) == 0 && written;
  job.file = nullptr;
  if (!written) fail("--logits-out: writing '", o.logits_out, "' failed");
  nlohmann::ordered_json j;
  j["tokens"] = job.ids.size();
  j["vocab"] = vocab;
  j["logits_out"] = o.logits_out;
  j["dtype"] = "f32";
  j["mode"] = o.mode;
  j["prefill_chunk"] = chunk;
  out << dump_json(j) << "\n" << std::flush;
}

BenchJob prepare_bench(const EngineInfo& info, const CommandLine& cl) {
  const Options& o = cl.options;
  BenchJob job;
  BenchSettings& bs = job.settings;
  bs = cl.bench;
  if (!cl.bench_prompts.empty()) bs.prompts = parse_int_list("--prompts", cl.bench_prompts);
  if (!cl.bench_gens.empty()) bs.gens = parse_int_list("--gens", cl.bench_gens);
  if (!cl.bench_batch.empty()) bs.batch = parse_int_list("--batch", cl.bench_batch);
  if (!cl.bench_parts.empty()) {
    bs.parts.clear();
    std::stringstream ss(cl.bench_parts);
    for (std::string p; std::getline(ss, p, ',');) bs.parts.push_back(p);
  }
  try {
    job.plan = plan_bench(bs, info.max_context);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (!bs.json_path.empty()) {
    job.json_file.open(bs.json_path);
    if (!job.json_file) usage_fail("--json: cannot create '", bs.json_path, "'");
  }
  try {
    const io::ModelConfig c = io::load_model_config(o.model_dir);
    job.cost = {c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads,
                c.num_key_value_heads, c.head_dim, OpCostModel::bytes_per_weight(info.weight_dtype),
                o.mode == "fast" && info.bf16_kv_in_fast ? 2.0 : 4.0};  // the KV cache's element (runtime.kv_dtype)
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  return job;
}

void finish_bench(const EngineInfo& info, const Options& o, BenchJob& job, const BenchMeasurements& m, std::ostream& out) {
  const BenchSettings& bs = job.settings;
  nlohmann::ordered_json report =
      bench_report(bs, job.plan, job.cost, info.max_context, max_step_tokens(info), o.threads, m);
  report["engine"] = {{"name", info.engine_name},         {"kernel_level", info.kernel_level},
                      {"max_context", info.max_context},  {"chunked_prefill", info.chunked_prefill},
                      {"max_batch", info.max_batch},      {"weight_dtype", info.weight_dtype},
                      {"mode", o.mode}};
  const std::string text = dump_json(report);
  if (job.json_file.is_open()) {
    job.json_file << report.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    job.json_file.close();
    if (!job.json_file) fail("--json: writing '", bs.json_path, "' failed");
  }
  errno = 0;
  out << text << "\n" << std::flush;
  check_output(out, errno);
}

}  // namespace cli_detail
}  // namespace mi::engine
