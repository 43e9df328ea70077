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
//
// Split for the build: everything that does not call the model (the command line itself, built with CLI11; the
// checks; the tokenizer and prompt preparation; the JSON printed) is non-template code in cli.cpp, compiled once into
// engine_core and so shared, through ccache, by every engine. What is left here is the thin dispatch that loads the
// generated Model and runs it: engine_main.cpp, whose model.h differs per engine, compiles only that.
#pragma once
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iosfwd>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/output_check.h"
#include "engine/bench.h"
#include "engine/generation.h"
#include "engine/model_interface.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace CLI {
class App;  // CLI11: only the .cpp files that build the command line include it
}

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
  bool bf16_kv_in_fast = false;  // runtime.kv_dtype = "bf16": fast numerics caches keys and values as bf16
  std::string weight_dtype;  // "bf16", "f32", ... (bench --profile counts weight bytes by it)
};

// A subcommand an engine adds beyond the shared ones because its constraints ask for it (e.g. `serve` for
// runtime.mode = "serve"). `add` registers it and its options on the app before parsing and returns it (non-template
// code in the extra's own .cpp file, so CLI11 never reaches the model's translation unit); `run` runs it when it was
// the command given.
struct ExtraCommand {
  std::function<CLI::App*(CLI::App&)> add;
  std::function<int()> run;
};

// The extra commands of an engine whose constraints ask for none. An engine's generated engine_features.h names
// the type whose add<M>(info, out, err) lists its extra commands.
struct NoExtraCommands {
  template <class M>
  static std::vector<ExtraCommand> add(const EngineInfo&, std::ostream&, std::ostream&) {
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
void check_output(const std::ostream& out, int error);

// A tokenizer or chat-template failure is bad input naming the file: messages that do not name it get it prefixed.
std::string naming_file(const std::string& message, const std::filesystem::path& file);

template <class... Parts>
[[noreturn]] void usage_fail(const Parts&... parts) {
  try {
    fail(parts...);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

// "1,2,3" -> ids. Spaces around an id are allowed; every id must be a decimal integer in [0, 2^31).
std::vector<int32_t> parse_prompt_ids(std::string_view text);

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
  bool mark_prompt_start = false;  // generate: one '@' record on stdout when the prompt starts (metainfer bench)
  std::string logits_out;  // score: where the logits go
};

// The command parse_command_line found, checked as far as it can be without the model.
enum class Command { done, generate, chat, score, bench, extra };

struct CommandLine {
  Command command = Command::done;
  int status = 0;  // Command::done: the exit status (help or --version printed, a usage error reported)
  Options options;
  BenchSettings bench;  // bench: the settings, with the lists below not yet parsed
  std::string bench_prompts, bench_gens, bench_batch, bench_parts;
  std::size_t extra = 0;  // Command::extra: which of the extra commands
};

// Parses argv (CLI11) and checks what needs no model: usage errors, --help and --version are printed here and end
// with Command::done. `chat_available`: the engine has the chat template interpreter; `extras` are registered as
// subcommands.
CommandLine parse_command_line(const EngineInfo& info, bool chat_available, const std::vector<ExtraCommand>& extras,
                               int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// Runs `command` and turns what it throws into the exit status and one message on `err`: UsageError 2, any other
// failure 1.
int run_reporting_errors(const EngineInfo& info, std::ostream& err, const std::function<int()>& command);

// The most tokens one forward step may take: the scratch is sized for the compiled chunk, else max_context.
int max_step_tokens(const EngineInfo& info);
bool has_tokenizer(const std::string& model_dir);
void require_tokenizer(const std::string& model_dir, const std::string& what);
tok::Tokenizer load_tokenizer(const std::string& model_dir);
RuntimeOptions runtime_options(const Options& o, const EngineInfo& info);
GenerationLimits generation_limits(const EngineInfo& info, const Options& o);
void check_ids(const std::vector<int32_t>& ids, int vocab_size);

// max_new_tokens for a prompt of `prompt_tokens`: the flag's value, or the default capped by the context left.
// UsageError (naming both numbers) when the request cannot fit max_context.
int budget(const Options& o, const EngineInfo& info, std::size_t prompt_tokens);

// `generate` up to loading the model: the tokenizer (when the checkpoint has one or the request needs it) and the
// request. `encode_chat` (null without chat) renders --prompt as a user message and encodes it.
struct PreparedGeneration {
  std::optional<tok::Tokenizer> tokenizer;
  GenerationRequest request;
};
using ChatPromptEncoder = std::vector<int32_t> (*)(const std::string& model_dir, const tok::Tokenizer& tokenizer,
                                                   const std::string& prompt);
PreparedGeneration prepare_generation(const EngineInfo& info, const Options& o, ChatPromptEncoder encode_chat);

// Streams text (or, without a tokenizer, comma-separated ids) to `out` as it is generated; none with --json.
GenerationCallbacks streaming_callbacks(const Options& o, bool tokenizer, std::ostream& out);

// After the generation: the final newline, or with --json the one-line object.
void print_generation(const Options& o, const GenerationResult& r, const std::string& kernel_level, bool tokenizer,
                      std::ostream& out);

// `score` up to loading the model: the ids (checked) and the created --logits-out file.
struct ScoreJob {
  std::vector<int32_t> ids;
  std::FILE* file = nullptr;
};
ScoreJob prepare_score(const EngineInfo& info, const Options& o);

// Closes the logits file (a failed write is an error naming it) and prints the summary object.
void finish_score(const Options& o, ScoreJob& job, bool written, int vocab, int chunk, std::ostream& out);

// `bench` up to loading the model: the parsed lists, the checked plan, the opened --json file and the cost model.
struct BenchJob {
  BenchSettings settings;
  BenchPlan plan;
  OpCostModel cost;
  std::ofstream json_file;
};
BenchJob prepare_bench(const EngineInfo& info, const CommandLine& cl);

// Writes the report of `m` to --json (when given) and, as one JSON line, to `out`.
void finish_bench(const EngineInfo& info, const Options& o, BenchJob& job, const BenchMeasurements& m, std::ostream& out);

template <EngineModel M, class Chat>
int run_generate(const EngineInfo& info, const Options& o, std::ostream& out) {
  ChatPromptEncoder encode_chat = nullptr;
  if constexpr (Chat::available) encode_chat = &Chat::encode_user_prompt;
  PreparedGeneration g = prepare_generation(info, o, encode_chat);
  M model = load_model<M>(o.model_dir, runtime_options(o, info));
  check_ids(g.request.prompt_ids, model.vocab_size());
  const GenerationCallbacks callbacks = streaming_callbacks(o, g.tokenizer.has_value(), out);
  const GenerationResult r =
      generate(model, g.tokenizer ? &*g.tokenizer : nullptr, generation_limits(info, o), g.request, callbacks);
  print_generation(o, r, ModelFacts(model.facts()).kernel_level, g.tokenizer.has_value(), out);
  return 0;
}

// Teacher-forced scoring: the ids are fed in prefill steps of --prefill-chunk tokens (the compiled default when not
// given) and the logits of every position are written to --logits-out as raw little-endian f32, row-major
// [n, vocab] (row j is the distribution after ids[0..j]). The gates compare them with the acceptance oracle.
template <EngineModel M>
int run_score(const EngineInfo& info, const Options& o, std::ostream& out) {
  ScoreJob job = prepare_score(info, o);
  const std::vector<int32_t>& ids = job.ids;
  M model = load_model<M>(o.model_dir, runtime_options(o, info));
  const int vocab = model.vocab_size();
  const int chunk = o.prefill_chunk > 0 ? o.prefill_chunk : max_step_tokens(info);
  std::vector<float> logits(std::size_t(std::min<std::size_t>(std::size_t(chunk), ids.size())) * std::size_t(vocab));
  const int seq = model.new_sequence();
  bool written = true;
  for (std::size_t first = 0; first < ids.size(); first += std::size_t(chunk)) {
    const int n = int(std::min<std::size_t>(std::size_t(chunk), ids.size() - first));
    model.forward(seq, ids.data() + first, n, logits.data(), true);
    written = written && std::fwrite(logits.data(), sizeof(float), std::size_t(n) * std::size_t(vocab), job.file) ==
                             std::size_t(n) * std::size_t(vocab);
  }
  model.free_sequence(seq);
  finish_score(o, job, written, vocab, chunk, out);
  return 0;
}

// `bench`: engine/bench.h. The report goes to --json (when given) and, as one JSON line, to `out`.
template <EngineModel M>
int run_bench(const EngineInfo& info, const CommandLine& cl, std::ostream& out, std::ostream& err) {
  const Options& o = cl.options;
  BenchJob job = prepare_bench(info, cl);
  auto make_model = [&](int max_batch, int max_context) {
    RuntimeOptions r = runtime_options(o, info);
    r.max_batch = max_batch;
    r.max_context = max_context;
    r.kv_block_size = std::min(info.kv_block_size, max_context);
    return load_model<M>(o.model_dir, r);
  };
  const BenchMeasurements m = run_engine_bench<M>(job.settings, job.plan, info.max_context, max_step_tokens(info),
                                                  o.threads, make_model, err);
  finish_bench(info, o, job, m, out);
  return 0;
}

}  // namespace cli_detail

// Parses the command line and runs it; returns the process exit status. Output goes to `out`, messages to `err`,
// chat turns are read from `in`. run_engine_cli below adds the final check of `out`.
template <EngineModel M, class Extras = NoExtraCommands, class Chat = NoChat>
int run_engine_cli_unchecked(const EngineInfo& info, int argc, const char* const* argv, std::istream& in,
                             std::ostream& out, std::ostream& err) {
  using namespace cli_detail;
  const std::vector<ExtraCommand> extras = Extras::template add<M>(info, out, err);
  const CommandLine cl = parse_command_line(info, Chat::available, extras, argc, argv, out, err);
  if (cl.command == Command::done) return cl.status;
  return run_reporting_errors(info, err, [&]() -> int {
    switch (cl.command) {
      case Command::extra:
        return extras[cl.extra].run();
      case Command::score:
        return run_score<M>(info, cl.options, out);
      case Command::bench:
        return run_bench<M>(info, cl, out, err);
      case Command::generate:
        return run_generate<M, Chat>(info, cl.options, out);
      case Command::chat:
        if constexpr (Chat::available) return Chat::template run<M>(info, cl.options, in, out, err);
        break;
      case Command::done:
        break;
    }
    fail("internal: no command to run");  // parse_command_line ends every other case with Command::done
  });
}

// Flushes `out` after the command: everything written to it must reach it, else "cannot write to standard output"
// and exit 1 (a failure reported during the run keeps its own status).
int check_final_output(const EngineInfo& info, int status, std::ostream& out, std::ostream& err);

// The command line with its output checked (check_final_output).
template <EngineModel M, class Extras = NoExtraCommands, class Chat = NoChat>
int run_engine_cli(const EngineInfo& info, int argc, const char* const* argv, std::istream& in, std::ostream& out,
                   std::ostream& err) {
  return check_final_output(info, run_engine_cli_unchecked<M, Extras, Chat>(info, argc, argv, in, out, err), out, err);
}

template <EngineModel M, class Extras = NoExtraCommands, class Chat = NoChat>
int run_engine_cli(const EngineInfo& info, int argc, const char* const* argv) {
  return run_engine_cli<M, Extras, Chat>(info, argc, argv, std::cin, std::cout, std::cerr);
}

}  // namespace mi::engine
