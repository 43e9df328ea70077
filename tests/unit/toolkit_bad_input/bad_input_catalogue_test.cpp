// The bad-input catalogue: every way a user's input can be wrong that metainfer and a generated engine answer with
// a clear message and a documented exit status, one row each, run against the real binaries. A row names the
// command, the planted defect, the expected exit status and a substring the message (stderr) must contain; some
// rows also check that nothing the user owns was changed.
//
//   exit 2  bad input: flags, constraints, config.json (bounds, another model than the engine's), checkpoint,
//           tokenizer.json / chat template (naming the file), an output directory holding the user's files
//   exit 3  not covered (metainfer plan/generate; the gap report is on stdout)
//   exit 1  a runtime failure: standard output that cannot be written (full, closed, a reader gone), a checkpoint
//           file truncated while an engine has it mapped (SIGBUS turned into a message)
//
// Rows run by `metainfer` share nothing; rows run by a generated engine share one engine (golden qwen3-tiny, avx2
// kernels), generated and built once in that test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "../toolkit_support.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"

namespace {
namespace fs = std::filesystem;
using mi_test::golden;
using nlohmann::json;

// What a row runs: argv (no shell), or /bin/sh -c for redirections (>/dev/full, >&-, a pipe whose reader is gone).
struct Command {
  std::vector<std::string> argv;
  std::string stdin_data;
};

// Where a row plants its defect: a fresh directory, and the shared engine binary (engine rows).
struct Context {
  fs::path work;
  fs::path engine;
};

struct Row {
  std::string id;
  bool engine = false;  // run by the generated engine (needs the shared build)
  std::string defect;   // what is wrong with the input
  int status = 2;       // expected exit status
  std::string message;  // must appear on stderr ("" = no check, for control rows)
  std::function<Command(const Context&)> plant;
  std::function<void(const Context&)> after;  // further checks after the run (nothing of the user's was changed)
};

const std::string kMetainfer = METAINFER_BINARY;

std::string q(const fs::path& p) {  // shell quoting
  std::string s = "'";
  for (char c : p.string()) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return s + "'";
}

Command sh(const std::string& script) { return {{"/bin/sh", "-c", script}, ""}; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream b;
  b << in.rdbuf();
  return b.str();
}

// A checkpoint the engine was generated for (config.json + weights of golden qwen3-tiny), copied into work/name.
fs::path checkpoint(const Context& c, const std::string& name = "ckpt") {
  const fs::path dir = c.work / name;
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(golden("qwen3-tiny") / f, dir / f, fs::copy_options::overwrite_existing);
  return dir;
}

json config_of(const fs::path& dir) { return json::parse(slurp(dir / "config.json")); }

// The checkpoint's safetensors header padded with spaces (as the format allows) so that its data, and so every tensor
// of the golden tiny model (sizes multiples of 64 bytes), starts on a 64-byte boundary: the engine then keeps the
// projections (each under 2 MiB) mapped instead of copying them at load (model/resident_weights.h), and its forward
// reads the file.
void align_tensors(const fs::path& file) {
  std::string bytes = slurp(file);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const uint64_t pad = (64 - (8 + n) % 64) % 64, padded = n + pad;
  std::string out(8, '\0');
  std::memcpy(out.data(), &padded, 8);
  out += bytes.substr(8, n) + std::string(pad, ' ') + bytes.substr(8 + n);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << out;
}

// The checkpoint with config.json edited.
fs::path edited(const Context& c, const std::function<void(json&)>& edit) {
  const fs::path dir = checkpoint(c);
  json cfg = config_of(dir);
  edit(cfg);
  mi_test::write_text(dir / "config.json", cfg.dump(2));
  return dir;
}

// The checkpoint with config.json's text replaced (for literals such as 1e9).
fs::path raw_config(const Context& c, const std::string& from, const std::string& to) {
  const fs::path dir = checkpoint(c);
  std::string text = slurp(dir / "config.json");
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  mi_test::write_text(dir / "config.json", text);
  return dir;
}

// A tokenizer whose ids fit the golden vocabulary (letters a-e and a space; ids 0..11) and a chat template.
void tiny_tokenizer(const fs::path& dir, const std::string& chat_template) {
  const json tokenizer = {{"version", "1.0"}, {"normalizer", nullptr}, {"pre_tokenizer", nullptr},
                          {"post_processor", nullptr}, {"decoder", nullptr}, {"added_tokens", json::array()},
                          {"model", {{"type", "BPE"}, {"merges", json::array()},
                                     {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"d", 3}, {"e", 4}, {"ab", 5}, {"bc", 6},
                                                {"abc", 7}, {"aa", 8}, {"cd", 9}, {"abcd", 10}, {" ", 11}}}}}};
  mi_test::write_text(dir / "tokenizer.json", tokenizer.dump());
  mi_test::write_text(dir / "tokenizer_config.json", json{{"chat_template", chat_template}}.dump());
}
const std::string kPlainTemplate = "{% for m in messages %}{{ m['content'] }}{% endfor %}";

Command metainfer(std::vector<std::string> args) {
  args.insert(args.begin(), kMetainfer);
  return {args, ""};
}
Command engine(const Context& c, std::vector<std::string> args) {
  args.insert(args.begin(), c.engine.string());
  return {args, ""};
}
// The engine generating from the intact checkpoint `dir`.
Command engine_run(const Context& c, const fs::path& dir) {
  return engine(c, {"generate", "--model", dir.string(), "--prompt-ids", "1,2,3", "--max-new-tokens", "4", "--json"});
}
// A config.json field changed: the engine refuses the checkpoint, naming the field.
Row mismatch(const std::string& id, const std::string& field, std::function<void(json&)> edit) {
  return {id, true, "config.json " + field + " differs from the engine's", 2, "field '" + field + "'",
          [edit](const Context& c) { return engine_run(c, edited(c, edit)); }};
}

// `cmd > /dev/full`, `cmd >&-`, and `cmd | (reader gone)`: exit 1 naming standard output.
std::string words(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    s += q(a);
  }
  return s;
}
Row to_full(const std::string& id, bool eng, std::function<std::vector<std::string>(const Context&)> argv) {
  return {id, eng, "standard output is /dev/full", 1, "cannot write to standard output: No space left on device",
          [argv](const Context& c) { return sh(words(argv(c)) + " >/dev/full"); }};
}
Row to_closed(const std::string& id, bool eng, std::function<std::vector<std::string>(const Context&)> argv) {
  return {id, eng, "standard output is closed", 1, "cannot write to standard output: Bad file descriptor",
          [argv](const Context& c) { return sh(words(argv(c)) + " >&-"); }};
}
Row to_gone_reader(const std::string& id, bool eng, std::function<std::vector<std::string>(const Context&)> argv) {
  return {id, eng, "standard output is a pipe whose reader has exited", 1, "cannot write to standard output: Broken pipe",
          [argv](const Context& c) {
            const fs::path status = c.work / "status";
            return sh("( sleep 0.5; " + words(argv(c)) + "; echo $? > " + q(status) + " ) | : ; exit $(cat " +
                      q(status) + ")");
          }};
}

// A directory with the user's files: a repository, notes, and a MANIFEST.json that is not an engine's.
void user_dir(const fs::path& dir, const std::string& manifest) {
  mi_test::write_text(dir / ".git/HEAD", "ref: refs/heads/main\n");
  mi_test::write_text(dir / "notes.txt", "my notes\n");
  if (!manifest.empty()) mi_test::write_text(dir / "MANIFEST.json", manifest);
}
void expect_user_files_kept(const fs::path& dir) {
  EXPECT_EQ(slurp(dir / ".git/HEAD"), "ref: refs/heads/main\n");
  EXPECT_EQ(slurp(dir / "notes.txt"), "my notes\n");
}
std::vector<std::string> generate_args(const fs::path& out) {
  // runtime.chat on: the engine rows drive `chat` and --chat (the checkpoints they give carry a template).
  return {kMetainfer, "generate", "--model", golden("qwen3-tiny").string(), "--platform", "x86-64-avx2", "--chat", "on",
          "--no-verify", "-o", out.string()};
}
const std::string kFakeManifest = R"({"format": "metainfer-manifest/1", "files": []})";

std::vector<Row> catalogue() {
  const std::string g = golden("qwen3-tiny").string();
  const std::string qwen_tok = (fs::path(METAINFER_TOKENIZERS) / "qwen3").string();
  std::vector<Row> rows = {
      // ---- generate -o DIR: nothing the user owns is lost -------------------------------------------------------
      {"generate_into_user_dir_with_fake_manifest", false, ".git/, notes.txt and a MANIFEST.json listing nothing", 2,
       "refusing to write the engine",
       [](const Context& c) {
         user_dir(c.work / "out", kFakeManifest);
         return Command{generate_args(c.work / "out"), ""};
       },
       [](const Context& c) {
         expect_user_files_kept(c.work / "out");
         EXPECT_EQ(slurp(c.work / "out/MANIFEST.json"), kFakeManifest);
         EXPECT_FALSE(fs::exists(c.work / "out/src"));
       }},
      {"generate_force_keeps_user_files", false, "the same directory with --force", 0, "they are kept, not deleted",
       [](const Context& c) {
         user_dir(c.work / "out", kFakeManifest);
         auto args = generate_args(c.work / "out");
         args.push_back("--force");
         return Command{args, ""};
       },
       [](const Context& c) {
         expect_user_files_kept(c.work / "out");
         EXPECT_TRUE(fs::exists(c.work / "out/src/model.h"));
       }},
      {"generate_into_dir_without_manifest", false, "a directory holding notes.txt and no MANIFEST.json", 2,
       "holds no metainfer engine",
       [](const Context& c) {
         user_dir(c.work / "out", "");
         return Command{generate_args(c.work / "out"), ""};
       },
       [](const Context& c) { expect_user_files_kept(c.work / "out"); }},
      {"generate_manifest_of_another_format", false, "MANIFEST.json with format \"something-else/2\"", 2,
       "is not a metainfer engine manifest",
       [](const Context& c) {
         user_dir(c.work / "out", R"({"format": "something-else/2", "files": []})");
         return Command{generate_args(c.work / "out"), ""};
       },
       [](const Context& c) { expect_user_files_kept(c.work / "out"); }},
      {"generate_manifest_listing_a_path_outside", false, "MANIFEST.json lists ../outside.txt", 2,
       "not a plain relative path",
       [](const Context& c) {
         mi_test::write_text(c.work / "outside.txt", "keep\n");
         mi_test::write_text(c.work / "out/MANIFEST.json",
                             R"({"format": "metainfer-manifest/1", "files": [{"path": "../outside.txt"}]})");
         return Command{generate_args(c.work / "out"), ""};
       },
       [](const Context& c) { EXPECT_EQ(slurp(c.work / "outside.txt"), "keep\n"); }},
      {"generate_engine_dir_with_a_user_file", false, "a real engine directory plus the user's notes.txt", 2,
       "notes.txt",
       [](const Context& c) {
         const auto first = mi::process::run(generate_args(c.work / "out"));
         EXPECT_EQ(first.exit_code, 0) << first.err;
         mi_test::write_text(c.work / "out/notes.txt", "my notes\n");
         return Command{generate_args(c.work / "out"), ""};
       },
       [](const Context& c) {
         EXPECT_EQ(slurp(c.work / "out/notes.txt"), "my notes\n");
         EXPECT_TRUE(fs::exists(c.work / "out/src/model.h")) << "a refused run removes nothing";
       }},
      {"generate_force_through_a_symbolic_link", false, "--force into a directory whose src/ links elsewhere", 2,
       "is a symbolic link; refusing to write",
       [](const Context& c) {
         mi_test::write_text(c.work / "elsewhere/keep.h", "mine\n");
         fs::create_directories(c.work / "out");
         fs::create_directory_symlink(c.work / "elsewhere", c.work / "out/src");
         auto args = generate_args(c.work / "out");
         args.push_back("--force");
         return Command{args, ""};
       },
       [](const Context& c) {
         EXPECT_EQ(slurp(c.work / "elsewhere/keep.h"), "mine\n");
         EXPECT_EQ(std::distance(fs::directory_iterator(c.work / "elsewhere"), fs::directory_iterator()), 1);
       }},
      {"generate_out_is_a_file", false, "-o names a regular file", 2, "is not a directory",
       [](const Context& c) {
         mi_test::write_text(c.work / "file", "x");
         return Command{generate_args(c.work / "file"), ""};
       }},

      // ---- every command checks its output -------------------------------------------------------------------
      to_full("plan_json_to_full_stdout", false, [g](const Context&) {
        return std::vector<std::string>{kMetainfer, "plan", "--model", g, "--json"};
      }),
      to_closed("plan_to_closed_stdout", false, [g](const Context&) {
        return std::vector<std::string>{kMetainfer, "plan", "--model", g};
      }),
      to_gone_reader("plan_json_to_a_gone_reader", false, [g](const Context&) {
        return std::vector<std::string>{kMetainfer, "plan", "--model", g, "--json"};
      }),
      to_full("platform_json_to_full_stdout", false, [](const Context&) {
        return std::vector<std::string>{kMetainfer, "platform", "--json"};
      }),
      to_full("ckb_check_to_full_stdout", false, [](const Context&) {
        return std::vector<std::string>{kMetainfer, "ckb", "check", "--json"};
      }),
      to_closed("tokenize_to_closed_stdout", false, [qwen_tok](const Context&) {
        return std::vector<std::string>{kMetainfer, "tokenize", "--tokenizer", qwen_tok, "--text", "hello"};
      }),
      to_full("detokenize_to_full_stdout", false, [qwen_tok](const Context&) {
        return std::vector<std::string>{kMetainfer, "detokenize", "--tokenizer", qwen_tok, "--ids", "9707,11,1879"};
      }),
      to_full("chat_template_to_full_stdout", false, [qwen_tok](const Context& c) {
        mi_test::write_text(c.work / "m.json", R"([{"role": "user", "content": "hi"}])");
        return std::vector<std::string>{kMetainfer, "chat-template", "--tokenizer", qwen_tok, "--messages",
                                        (c.work / "m.json").string()};
      }),
      to_full("synth_model_to_full_stdout", false, [](const Context& c) {
        return std::vector<std::string>{kMetainfer, "synth-model", "--family", "llama", "--preset", "tiny",
                                        "--no-tokenizer", "--threads", "1", "-o", (c.work / "m").string()};
      }),
      to_full("generate_json_to_full_stdout", false, [](const Context& c) {
        auto args = generate_args(c.work / "out");
        args.push_back("--json");
        return args;
      }),
      to_closed("version_to_closed_stdout", false, [](const Context&) {
        return std::vector<std::string>{kMetainfer, "--version"};
      }),

      // ---- config values are bounded before anything is sized by them ---------------------------------------
      {"plan_num_hidden_layers_1e9", false, "config.json num_hidden_layers = 1e9", 2,
       "field 'num_hidden_layers': 1000000000.0 exceeds metainfer's bound of 1024",
       [](const Context& c) { return metainfer({"plan", "--model", raw_config(c, "\"num_hidden_layers\": 3", "\"num_hidden_layers\": 1e9").string()}); }},
      {"plan_num_hidden_layers_1e6", false, "config.json num_hidden_layers = 1000000", 2,
       "field 'num_hidden_layers': 1000000 exceeds metainfer's bound of 1024",
       [](const Context& c) { return metainfer({"plan", "--model", edited(c, [](json& j) { j["num_hidden_layers"] = 1000000; }).string()}); }},
      {"plan_vocab_size_2e9", false, "config.json vocab_size = 2000000000", 2, "field 'vocab_size'",
       [](const Context& c) { return metainfer({"plan", "--model", edited(c, [](json& j) { j["vocab_size"] = 2000000000; }).string()}); }},
      {"plan_hidden_size_beyond_bound", false, "config.json hidden_size = 1<<20", 2, "field 'hidden_size'",
       [](const Context& c) { return metainfer({"plan", "--model", edited(c, [](json& j) { j["hidden_size"] = 1 << 20; }).string()}); }},
      {"plan_attention_width_beyond_bound", false, "num_attention_heads 4096 x head_dim 4096", 2, "num_attention_heads * head_dim",
       [](const Context& c) {
         return metainfer({"plan", "--model", edited(c, [](json& j) { j["num_attention_heads"] = 4096; j["head_dim"] = 4096; }).string()});
       }},
      {"plan_max_position_embeddings_beyond_bound", false, "max_position_embeddings = 2^31-1", 2, "field 'max_position_embeddings'",
       [](const Context& c) { return metainfer({"plan", "--model", edited(c, [](json& j) { j["max_position_embeddings"] = 2147483647; }).string()}); }},

      // ---- tokenizer and chat-template errors name the file ---------------------------------------------------
      {"tokenize_tokenizer_without_model", false, "tokenizer.json without 'model'", 2, "tokenizer.json",
       [](const Context& c) {
         mi_test::write_text(c.work / "tok/tokenizer.json", R"({"added_tokens": []})");
         return metainfer({"tokenize", "--tokenizer", (c.work / "tok").string(), "--text", "a"});
       }},
      {"tokenize_tokenizer_bad_regex", false, "a Split pre-tokenizer whose regex does not compile", 2, "tokenizer.json",
       [](const Context& c) {
         tiny_tokenizer(c.work / "tok", kPlainTemplate);
         json t = json::parse(slurp(c.work / "tok/tokenizer.json"));
         t["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "("}}}, {"behavior", "Isolated"}, {"invert", false}};
         mi_test::write_text(c.work / "tok/tokenizer.json", t.dump());
         return metainfer({"tokenize", "--tokenizer", (c.work / "tok").string(), "--text", "a"});
       }},
      {"tokenize_tokenizer_not_json", false, "tokenizer.json is not JSON", 2, "tokenizer.json",
       [](const Context& c) {
         mi_test::write_text(c.work / "tok/tokenizer.json", "{ nope");
         return metainfer({"tokenize", "--tokenizer", (c.work / "tok").string(), "--text", "a"});
       }},
      {"detokenize_bad_special_token", false, "tokenizer_config.json bos_token is a number", 2, "tokenizer",
       [](const Context& c) {
         tiny_tokenizer(c.work / "tok", kPlainTemplate);
         mi_test::write_text(c.work / "tok/tokenizer_config.json", R"({"bos_token": 3})");
         return metainfer({"detokenize", "--tokenizer", (c.work / "tok").string(), "--ids", "1"});
       }},
      {"chat_template_raises", false, "a template calling raise_exception()", 2, "tokenizer_config.json",
       [](const Context& c) {
         tiny_tokenizer(c.work / "tok", "{{ raise_exception('no system role') }}");
         mi_test::write_text(c.work / "m.json", "[]");
         return metainfer({"chat-template", "--tokenizer", (c.work / "tok").string(), "--messages", (c.work / "m.json").string()});
       }},
      {"chat_template_syntax_error", false, "a template that does not parse", 2, "tokenizer_config.json",
       [](const Context& c) {
         tiny_tokenizer(c.work / "tok", "{{ foo( }}");
         mi_test::write_text(c.work / "m.json", "[]");
         return metainfer({"chat-template", "--tokenizer", (c.work / "tok").string(), "--messages", (c.work / "m.json").string()});
       }},

      // ---- already handled elsewhere (toolkit_plan, toolkit_ckb, toolkit_synth, cli_tokenizer, cli_chat) -------
      {"plan_unknown_constraint_key", false, "constraints [runtime] max_batchh", 2, "runtime.max_batchh",
       [g](const Context& c) {
         mi_test::write_text(c.work / "c.toml", "[model]\npath = \"" + g + "\"\n[runtime]\nmax_batchh = 2\n");
         return metainfer({"plan", (c.work / "c.toml").string()});
       }},
      {"plan_constraint_wrong_type", false, "constraints max_batch = \"two\"", 2, "runtime.max_batch",
       [g](const Context& c) {
         mi_test::write_text(c.work / "c.toml", "[model]\npath = \"" + g + "\"\n[runtime]\nmax_batch = \"two\"\n");
         return metainfer({"plan", (c.work / "c.toml").string()});
       }},
      {"plan_tp_not_dividing_heads", false, "--tp 3 with 4 heads", 2, "parallel.tensor_parallel",
       [g](const Context&) { return metainfer({"plan", "--model", g, "--tp", "3"}); }},
      {"plan_context_beyond_model", false, "--max-context beyond max_position_embeddings", 2, "runtime.max_context",
       [g](const Context&) { return metainfer({"plan", "--model", g, "--max-context", "100000"}); }},
      {"plan_nonexistent_model", false, "--model names no directory", 2, "model.path",
       [](const Context&) { return metainfer({"plan", "--model", "/nonexistent/model"}); }},
      {"plan_zero_kv_heads", false, "config.json num_key_value_heads = 0", 2, "num_key_value_heads",
       [](const Context& c) { return metainfer({"plan", "--model", edited(c, [](json& j) { j["num_key_value_heads"] = 0; }).string()}); }},
      {"plan_dimension_of_wrong_type", false, "config.json hidden_size = \"abc\"", 2, "hidden_size",
       [](const Context& c) { return metainfer({"plan", "--model", edited(c, [](json& j) { j["hidden_size"] = "abc"; }).string()}); }},
      {"plan_config_not_json", false, "config.json is not JSON", 2, "config.json",
       [](const Context& c) {
         const fs::path dir = checkpoint(c);
         mi_test::write_text(dir / "config.json", "{ not json");
         return metainfer({"plan", "--model", dir.string()});
       }},
      {"plan_another_model_is_not_covered", false, "hidden_act = gelu (another model)", 3, "hidden_act",
       [](const Context& c) { return metainfer({"plan", "--model", edited(c, [](json& j) { j["hidden_act"] = "gelu"; }).string()}); }},
      {"plan_hybrid_prefix_cache_is_not_covered", false, "qwen3_5 served with a prefix cache (recurrent state)", 3,
       "prefix caching cannot restore the recurrent state",
       [](const Context&) {
         return metainfer({"plan", "--model", golden("qwen3_5-tiny").string(), "--mode", "serve", "--prefix-cache", "on"});
       }},
      {"plan_moe_fast_numerics_refused", false, "qwen3_next with numerics fast (withheld for MoE)", 2,
       "is not offered for this model",
       [](const Context&) { return metainfer({"plan", "--model", golden("qwen3_next-tiny").string(), "--numerics", "fast"}); }},
      {"plan_unknown_architecture_is_not_covered", false, "an architecture no family knows", 3, "has no model-family entry",
       [](const Context& c) {
         return metainfer({"plan", "--model", edited(c, [](json& j) { j["architectures"] = {"Qwen3MoeForCausalLM"}; j["model_type"] = "qwen3_moe"; }).string()});
       }},
      {"ckb_check_malformed_toml", false, "a CKB platform file that is not TOML", 2, "x86-64-avx2.toml",
       [](const Context& c) {
         fs::copy(fs::path(METAINFER_SOURCE_DIR) / "ckb", c.work / "ckb", fs::copy_options::recursive);
         std::string text = slurp(c.work / "ckb/platforms/x86-64-avx2.toml");
         text.replace(text.find("priority = "), 11, "priority = = ");
         mi_test::write_text(c.work / "ckb/platforms/x86-64-avx2.toml", text);
         return metainfer({"ckb", "check", "--ckb", (c.work / "ckb").string()});
       }},
      {"synth_model_into_non_empty_dir", false, "-o holds the user's file", 2, "not empty",
       [](const Context& c) {
         mi_test::write_text(c.work / "m/user_file.txt", "mine");
         return metainfer({"synth-model", "--family", "qwen3", "--preset", "tiny", "--no-tokenizer", "-o", (c.work / "m").string()});
       },
       [](const Context& c) { EXPECT_EQ(slurp(c.work / "m/user_file.txt"), "mine"); }},
      {"synth_model_unknown_preset", false, "llama has no 0.6b preset", 2, "1b",
       [](const Context& c) { return metainfer({"synth-model", "--family", "llama", "--preset", "0.6b", "-o", (c.work / "m").string()}); }},
      {"tokenize_invalid_utf8", false, "text that is not UTF-8", 2, "UTF-8",
       [qwen_tok](const Context&) { return metainfer({"tokenize", "--tokenizer", qwen_tok, "--text", "ok \xC3\x28 bad"}); }},
      {"tokenize_missing_tokenizer", false, "--tokenizer names a directory without tokenizer.json", 2, "tokenizer.json",
       [](const Context& c) { return metainfer({"tokenize", "--tokenizer", c.work.string(), "--text", "hi"}); }},
      {"detokenize_unknown_id", false, "an id beyond the vocabulary", 2, "987654321",
       [qwen_tok](const Context&) { return metainfer({"detokenize", "--tokenizer", qwen_tok, "--ids", "9707,987654321"}); }},
      {"detokenize_malformed_ids", false, "--ids 1,x2,3", 2, "x2",
       [qwen_tok](const Context&) { return metainfer({"detokenize", "--tokenizer", qwen_tok, "--ids", "1,x2,3"}); }},
      {"chat_template_messages_not_json", false, "--messages file is not JSON", 2, "not valid JSON",
       [qwen_tok](const Context& c) {
         mi_test::write_text(c.work / "m.json", "[{");
         return metainfer({"chat-template", "--tokenizer", qwen_tok, "--messages", (c.work / "m.json").string()});
       }},
      {"unknown_flag", false, "a flag no command has", 2, "--bogus",
       [g](const Context&) { return metainfer({"plan", "--model", g, "--bogus"}); }},

      // ---- the generated engine ---------------------------------------------------------------------------------
      {"engine_control_ignorable_fields_differ", true, "transformers_version, torch_dtype, eos_token_id changed", 0, "",
       [](const Context& c) {
         return engine_run(c, edited(c, [](json& j) {
           j["transformers_version"] = "9.9.9";
           j["torch_dtype"] = "float32";
           j["eos_token_id"] = 7;
           j["_name_or_path"] = "somewhere/else";
         }));
       }},
      mismatch("engine_hidden_act", "hidden_act", [](json& j) { j["hidden_act"] = "gelu"; }),
      mismatch("engine_architectures", "architectures", [](json& j) { j["architectures"] = {"LlamaForCausalLM"}; }),
      mismatch("engine_model_type", "model_type", [](json& j) { j["model_type"] = "llama"; }),
      mismatch("engine_attention_bias", "attention_bias", [](json& j) { j["attention_bias"] = true; }),
      mismatch("engine_mlp_bias", "mlp_bias", [](json& j) { j["mlp_bias"] = true; }),
      mismatch("engine_sliding_window", "sliding_window", [](json& j) { j["sliding_window"] = 4096; }),
      mismatch("engine_use_sliding_window", "use_sliding_window", [](json& j) { j["use_sliding_window"] = true; }),
      mismatch("engine_layer_types", "layer_types", [](json& j) { j["layer_types"][1] = "sliding_attention"; }),
      mismatch("engine_moe_num_experts", "num_experts", [](json& j) { j["num_experts"] = 8; }),
      mismatch("engine_moe_num_local_experts", "num_local_experts", [](json& j) { j["num_local_experts"] = 8; }),
      mismatch("engine_moe_experts_per_tok", "num_experts_per_tok", [](json& j) { j["num_experts_per_tok"] = 2; }),
      mismatch("engine_moe_intermediate_size", "moe_intermediate_size", [](json& j) { j["moe_intermediate_size"] = 64; }),
      mismatch("engine_rope_scaling", "rope_scaling", [](json& j) {
        j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                             {"original_max_position_embeddings", 256}};
      }),
      mismatch("engine_rope_theta", "rope_theta", [](json& j) { j["rope_theta"] = 10000.0; }),
      mismatch("engine_rms_norm_eps", "rms_norm_eps", [](json& j) { j["rms_norm_eps"] = 1e-5; }),
      mismatch("engine_head_dim", "head_dim", [](json& j) { j["head_dim"] = 64; }),
      mismatch("engine_tie_word_embeddings", "tie_word_embeddings", [](json& j) { j["tie_word_embeddings"] = false; }),
      mismatch("engine_max_window_layers_missing", "max_window_layers", [](json& j) { j.erase("max_window_layers"); }),
      {"engine_num_hidden_layers_1e6", true, "config.json num_hidden_layers = 1000000", 2,
       "field 'num_hidden_layers': 1000000 exceeds metainfer's bound of 1024",
       [](const Context& c) { return engine_run(c, edited(c, [](json& j) { j["num_hidden_layers"] = 1000000; })); }},
      {"engine_config_not_json", true, "config.json is not JSON", 2, "config.json",
       [](const Context& c) {
         const fs::path dir = checkpoint(c);
         mi_test::write_text(dir / "config.json", "{ not json");
         return engine_run(c, dir);
       }},
      {"engine_missing_weight", true, "model.safetensors without a tensor", 2, "model.layers.1.mlp.up_proj.weight",
       [](const Context& c) {
         const fs::path dir = checkpoint(c);
         mi_test::write_weights_without(golden("qwen3-tiny"), dir / "model.safetensors", "model.layers.1.mlp.up_proj.weight");
         return engine_run(c, dir);
       }},
      {"engine_nonexistent_model", true, "--model names no directory", 2, "is not a directory",
       [](const Context& c) { return engine(c, {"generate", "--model", "/nonexistent/model", "--prompt-ids", "1"}); }},
      {"engine_bad_prompt_ids", true, "--prompt-ids 1,x,3", 2, "'x' is not a token id",
       [g](const Context& c) { return engine(c, {"generate", "--model", g, "--prompt-ids", "1,x,3"}); }},
      {"engine_prompt_id_outside_vocab", true, "--prompt-ids 1,512 (vocab 512)", 2, "outside the vocabulary",
       [g](const Context& c) { return engine(c, {"generate", "--model", g, "--prompt-ids", "1,512"}); }},
      {"engine_prompt_too_long", true, "prompt + --max-new-tokens beyond max_context", 2, "max_context of 512",
       [g](const Context& c) { return engine(c, {"generate", "--model", g, "--prompt-ids", "1,2,3", "--max-new-tokens", "510"}); }},
      {"engine_text_prompt_without_tokenizer", true, "--prompt for a checkpoint without tokenizer.json", 2, "tokenizer.json",
       [g](const Context& c) { return engine(c, {"generate", "--model", g, "--prompt", "hello"}); }},
      {"engine_unknown_flag", true, "--bogus", 2, "--bogus",
       [g](const Context& c) { return engine(c, {"generate", "--model", g, "--prompt-ids", "1", "--bogus"}); }},
      {"engine_invalid_utf8_prompt", true, "--prompt that is not UTF-8", 2, "--prompt",
       [](const Context& c) {
         const fs::path dir = checkpoint(c);
         tiny_tokenizer(dir, kPlainTemplate);
         return engine(c, {"generate", "--model", dir.string(), "--prompt", "abc\xff", "--max-new-tokens", "1"});
       }},
      {"engine_tokenizer_invalid", true, "tokenizer.json without a model", 2, "tokenizer.json",
       [](const Context& c) {
         const fs::path dir = checkpoint(c);
         mi_test::write_text(dir / "tokenizer.json", R"({"model": 3})");
         return engine(c, {"generate", "--model", dir.string(), "--prompt", "abc", "--max-new-tokens", "1"});
       }},
      {"engine_tokenizer_bad_regex", true, "a tokenizer.json regex that does not compile", 2, "tokenizer.json",
       [](const Context& c) {
         const fs::path dir = checkpoint(c);
         tiny_tokenizer(dir, kPlainTemplate);
         json t = json::parse(slurp(dir / "tokenizer.json"));
         t["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "("}}}, {"behavior", "Isolated"}, {"invert", false}};
         mi_test::write_text(dir / "tokenizer.json", t.dump());
         return engine(c, {"generate", "--model", dir.string(), "--prompt", "abc", "--max-new-tokens", "1"});
       }},
      {"engine_chat_template_raises", true, "--chat with a template calling raise_exception()", 2, "tokenizer_config.json",
       [](const Context& c) {
         const fs::path dir = checkpoint(c);
         tiny_tokenizer(dir, "{{ raise_exception('nope') }}");
         return engine(c, {"generate", "--model", dir.string(), "--prompt", "abc", "--chat", "--max-new-tokens", "1"});
       }},
      {"engine_chat_template_undefined", true, "chat with a template reading an undefined attribute", 2, "tokenizer_config.json",
       [](const Context& c) {
         const fs::path dir = checkpoint(c);
         tiny_tokenizer(dir, "{{ messages[0].nothing.deeper }}");
         Command cmd = engine(c, {"chat", "--model", dir.string(), "--max-new-tokens", "1"});
         cmd.stdin_data = "abc\n";
         return cmd;
       }},
      {"engine_chat_template_missing", true, "--chat without a chat template", 2, "tokenizer_config.json",
       [](const Context& c) {
         const fs::path dir = checkpoint(c);
         tiny_tokenizer(dir, kPlainTemplate);
         mi_test::write_text(dir / "tokenizer_config.json", "{}");
         return engine(c, {"generate", "--model", dir.string(), "--prompt", "abc", "--chat", "--max-new-tokens", "1"});
       }},
      to_full("engine_generate_to_full_stdout", true, [g](const Context& c) {
        return std::vector<std::string>{c.engine.string(), "generate", "--model", g, "--prompt-ids", "1,2,3", "--max-new-tokens", "4"};
      }),
      to_closed("engine_json_to_closed_stdout", true, [g](const Context& c) {
        return std::vector<std::string>{c.engine.string(), "generate", "--model", g, "--prompt-ids", "1,2,3", "--max-new-tokens", "4", "--json"};
      }),
      to_gone_reader("engine_generate_to_a_gone_reader", true, [g](const Context& c) {
        return std::vector<std::string>{c.engine.string(), "generate", "--model", g, "--prompt-ids", "1,2,3", "--max-new-tokens", "64"};
      }),
      to_full("engine_version_to_full_stdout", true, [](const Context& c) {
        return std::vector<std::string>{c.engine.string(), "--version", "--json"};
      }),
      {"engine_checkpoint_truncated_while_running", true,
       "model.safetensors truncated while the engine has it mapped (chat waits for its first line)", 1,
       "changed while the engine was reading it (SIGBUS at a mapped weight)",
       [](const Context& c) {
         const fs::path dir = checkpoint(c);
         align_tensors(dir / "model.safetensors");  // mapped, not copied: the forward reads the file
         tiny_tokenizer(dir, kPlainTemplate);
         // The engine reads its first line from a FIFO; once /proc shows the weights mapped, they are truncated
         // and the line is sent, so the first forward reads pages that no longer exist.
         const fs::path fifo = c.work / "in", weights = dir / "model.safetensors";
         return sh("mkfifo " + q(fifo) + " && { " + q(c.engine) + " chat --model " + q(dir) +
                   " --max-new-tokens 4 < " + q(fifo) + " & pid=$!; exec 3> " + q(fifo) +
                   "; n=0; until grep -q model.safetensors /proc/$pid/maps 2>/dev/null || [ $n -ge 400 ]; do sleep 0.05;"
                   " n=$((n+1)); done; : > " + q(weights) + "; printf 'abc\\n' >&3; exec 3>&-; wait $pid; }");
       },
       [](const Context& c) {
         // The same conversation on an intact checkpoint succeeds: the failure above is the truncation.
         const fs::path dir = checkpoint(c, "intact");
         tiny_tokenizer(dir, kPlainTemplate);
         const auto r = mi::process::run({c.engine.string(), "chat", "--model", dir.string(), "--max-new-tokens", "4"},
                                         {.timeout_s = 120, .stdin_data = "abc\n"});
         EXPECT_EQ(r.exit_code, 0) << r.err;
       }},
  };
  return rows;
}

void run_row(const Row& row, const fs::path& engine) {
  SCOPED_TRACE(row.id + " (" + row.defect + ")");
  mi_test::TempDir work("bad-input");
  const Context context{work.path(), engine};
  const Command cmd = row.plant(context);
  const auto r = mi::process::run(cmd.argv, {.timeout_s = 300, .stdin_data = cmd.stdin_data});
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, row.status) << r.command << "\nstderr: " << r.err << "\nstdout: " << mi::process::tail(r.out, 400);
  // Not covered (3) is an answer, not an error: the gap report is the output.
  const std::string& said = row.status == 3 ? r.out : r.err;
  if (!row.message.empty()) {
    EXPECT_NE(said.find(row.message), std::string::npos) << (row.status == 3 ? "stdout: " : "stderr: ") << said;
  }
  if (row.status != 0) {
    EXPECT_NE(said, "") << "a failure always says why";
  }
  if (row.after) row.after(context);
}

TEST(BadInputCatalogue, RowsAreNamedOnceAndDescribed) {
  std::set<std::string> ids;
  for (const Row& row : catalogue()) {
    EXPECT_TRUE(ids.insert(row.id).second) << "duplicate row " << row.id;
    EXPECT_FALSE(row.defect.empty()) << row.id;
    EXPECT_TRUE(row.status == 0 || row.message.size() > 0) << row.id << ": a failing row must name its message";
  }
  EXPECT_GE(ids.size(), 60u);
}

TEST(BadInputCatalogue, Metainfer) {
  for (const Row& row : catalogue())
    if (!row.engine) run_row(row, {});
}

// One engine for every engine row: generated from golden qwen3-tiny (avx2 kernels, so every x86-64 CI host runs it)
// and built with CMake, binary target only (ccache shares objects with the gates' engines).
TEST(BadInputCatalogue, GeneratedEngine) {
  mi_test::TempDir root("bad-input-engine");
  const fs::path dir = root / "engine";
  const auto gen = mi::process::run(generate_args(dir), {.timeout_s = 300});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  std::vector<std::string> configure = {"cmake", "-S", dir.string(), "-B", (dir / "build").string(), "-G", "Ninja",
                                        "-DCMAKE_BUILD_TYPE=Release"};
  if (std::system("command -v ccache >/dev/null 2>&1") == 0) configure.push_back("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache");
  const std::map<std::string, std::string> env = {{"CCACHE_BASEDIR", dir.string()}, {"CCACHE_NOHASHDIR", "1"}};
  const auto conf = mi::process::run(configure, {.env = env, .timeout_s = 600, .merge_stderr = true});
  ASSERT_EQ(conf.exit_code, 0) << mi::process::tail(conf.out);
  const std::string name = "qwen3-tiny-avx2";
  const auto build = mi::process::run({"cmake", "--build", (dir / "build").string(), "--target", name, "-j", "2"},
                                      {.env = env, .timeout_s = 1200, .merge_stderr = true});
  ASSERT_EQ(build.exit_code, 0) << mi::process::tail(build.out);
  const fs::path engine = dir / "build" / name;
  ASSERT_TRUE(fs::exists(engine));
  for (const Row& row : catalogue())
    if (row.engine) run_row(row, engine);
}

}  // namespace
