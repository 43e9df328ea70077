#include "constraints/constraints.h"

#include <set>

#include <toml++/toml.h>

#include "common/error.h"

namespace mi::constraints {
namespace fs = std::filesystem;

namespace {

// The schema: section -> keys. Anything else in a file is an unknown key.
const std::map<std::string, std::set<std::string>>& schema() {
  static const std::map<std::string, std::set<std::string>> s = {
      {"model", {"path"}},
      {"platform", {"name", "dtype", "threads"}},
      {"parallel", {"tensor_parallel"}},
      {"runtime", {"mode", "numerics", "kv_dtype", "max_batch", "max_context", "kv_block_size", "kv_blocks", "prefix_cache", "chat", "chunked_prefill"}},
      {"targets", {"ttft_ms", "tpot_ms", "throughput_tok_s", "memory_mb"}},
      {"tuning", {}},  // free keys: kernel parameters (validate() checks the form, coverage the platform)
  };
  return s;
}

std::string join(const std::set<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

std::string type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    default: return "a date/time";
  }
}

class FieldReader {
 public:
  FieldReader(const std::string& file, const toml::table& root) : file_(file), root_(root) {}

  const toml::node* node(const std::string& section, const std::string& key) const {
    const toml::table* t = root_[section].as_table();
    return t ? t->get(key) : nullptr;
  }
  [[noreturn]] void bad_type(const std::string& field, const std::string& expected, const toml::node& n) const {
    fail(file_, ": field '", field, "': expected ", expected, ", got ", type_name(n));
  }
  void read(const std::string& section, const std::string& key, std::string& out) const {
    if (const toml::node* n = node(section, key)) {
      if (!n->is_string()) bad_type(section + "." + key, "a string", *n);
      out = *n->value<std::string>();
    }
  }
  void read(const std::string& section, const std::string& key, int& out) const {
    if (const toml::node* n = node(section, key)) {
      if (!n->is_integer()) bad_type(section + "." + key, "an integer", *n);
      const int64_t v = *n->value<int64_t>();
      if (v < INT32_MIN || v > INT32_MAX) fail(file_, ": field '", section, ".", key, "': value out of range");
      out = int(v);
    }
  }
  void read(const std::string& section, const std::string& key, double& out) const {
    if (const toml::node* n = node(section, key)) {
      if (!n->is_number()) bad_type(section + "." + key, "a number", *n);
      out = *n->value<double>();
    }
  }
  void read(const std::string& section, const std::string& key, bool& out) const {
    if (const toml::node* n = node(section, key)) {
      if (!n->is_boolean()) bad_type(section + "." + key, "a boolean (true or false)", *n);
      out = *n->value<bool>();
    }
  }

 private:
  std::string file_;
  const toml::table& root_;
};

void check_one_of(const std::string& source, const std::string& field, const std::string& value,
                  const std::set<std::string>& allowed) {
  if (!allowed.count(value))
    fail(source, ": field '", field, "': expected one of ", join(allowed), ", got \"", value, "\"");
}

void check_range(const std::string& source, const std::string& field, double value, double lo, double hi) {
  if (!(value >= lo && value <= hi))
    fail(source, ": field '", field, "': expected a value in [", lo, ", ", hi, "], got ", value);
}

bool parse_on_off(const std::string& field, const std::string& text) {
  if (text == "on" || text == "true" || text == "1") return true;
  if (text == "off" || text == "false" || text == "0") return false;
  fail("command line: option '", field, "': expected on or off, got \"", text, "\"");
}

}  // namespace

nlohmann::json Constraints::to_json() const {
  return {{"model", model.string()},
          {"platform", platform},
          {"dtype", dtype},
          {"threads", threads},
          {"tensor_parallel", tensor_parallel},
          {"mode", mode},
          {"numerics", numerics},
          {"kv_dtype", kv_dtype},
          {"max_batch", max_batch},
          {"max_context", max_context},
          {"kv_block_size", kv_block_size},
          {"kv_blocks", kv_blocks},
          {"prefix_cache", prefix_cache},
          {"chat", wants_chat()},
          {"chunked_prefill", chunked_prefill},
          {"targets",
           {{"ttft_ms", targets.ttft_ms},
            {"tpot_ms", targets.tpot_ms},
            {"throughput_tok_s", targets.throughput_tok_s},
            {"memory_mb", targets.memory_mb}}},
          {"tuning", tuning},
          {"source", source}};
}

Constraints load_file(const fs::path& file) {
  if (!fs::exists(file)) fail(file.string(), ": constraints file not found");
  toml::table root;
  try {
    root = toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    fail(file.string(), ":", e.source().begin.line, ":", e.source().begin.column, ": TOML syntax error: ",
         std::string(e.description()));
  }
  const std::string source = file.string();
  for (const auto& [section_key, node] : root) {
    const std::string section(section_key.str());
    auto it = schema().find(section);
    if (it == schema().end()) {
      std::set<std::string> sections;
      for (const auto& [name, keys] : schema()) sections.insert(name);
      fail(source, ": unknown section '", section, "' (known sections: ", join(sections), ")");
    }
    const toml::table* t = node.as_table();
    if (!t) fail(source, ": field '", section, "': expected a table [", section, "], got ", type_name(node));
    for (const auto& [key, value] : *t) {
      if (section == "tuning") {
        if (!value.is_integer())
          fail(source, ": field 'tuning.", std::string(key.str()), "': expected an integer, got ", type_name(value));
        continue;
      }
      if (!it->second.count(std::string(key.str())))
        fail(source, ": unknown key '", section, ".", std::string(key.str()), "' (known keys of [", section, "]: ",
             join(it->second), ")");
    }
  }

  Constraints c;
  c.source = source;
  FieldReader r(source, root);
  std::string model_path;
  r.read("model", "path", model_path);
  if (!model_path.empty()) {
    fs::path p = model_path;
    c.model = p.is_absolute() ? p : (fs::absolute(file).parent_path() / p).lexically_normal();
  }
  r.read("platform", "name", c.platform);
  r.read("platform", "dtype", c.dtype);
  r.read("platform", "threads", c.threads);
  r.read("parallel", "tensor_parallel", c.tensor_parallel);
  r.read("runtime", "mode", c.mode);
  r.read("runtime", "numerics", c.numerics);
  r.read("runtime", "kv_dtype", c.kv_dtype);
  r.read("runtime", "max_batch", c.max_batch);
  r.read("runtime", "max_context", c.max_context);
  r.read("runtime", "kv_block_size", c.kv_block_size);
  r.read("runtime", "kv_blocks", c.kv_blocks);
  r.read("runtime", "prefix_cache", c.prefix_cache);
  if (r.node("runtime", "chat")) {
    bool chat = false;
    r.read("runtime", "chat", chat);
    c.chat = chat;
  }
  r.read("runtime", "chunked_prefill", c.chunked_prefill);
  r.read("targets", "ttft_ms", c.targets.ttft_ms);
  r.read("targets", "tpot_ms", c.targets.tpot_ms);
  r.read("targets", "throughput_tok_s", c.targets.throughput_tok_s);
  r.read("targets", "memory_mb", c.targets.memory_mb);
  if (const toml::table* t = root["tuning"].as_table())
    for (const auto& [key, value] : *t) c.tuning[std::string(key.str())] = int(*value.value<int64_t>());
  return c;
}

void add_override_options(CLI::App* cmd, Overrides& o) {
  cmd->add_option("--model", o.model, "Hugging Face checkpoint directory (model.path)");
  cmd->add_option("--platform", o.platform, "auto or a platform id from ckb/platforms (platform.name)");
  cmd->add_option("--dtype", o.dtype, "auto | bf16 | f16 | f32 | int8 (platform.dtype; int8 = weights quantised at load)");
  cmd->add_option("--threads", o.threads, "worker threads, 0 = all allowed CPUs (platform.threads)");
  cmd->add_option("--tp,--tensor-parallel", o.tensor_parallel, "tensor-parallel size (parallel.tensor_parallel)");
  cmd->add_option("--mode", o.mode, "offline | serve | bench (runtime.mode)");
  cmd->add_option("--numerics", o.numerics, "precise | fast (runtime.numerics)");
  cmd->add_option("--kv-dtype", o.kv_dtype, "f32 | bf16: KV cache element in fast numerics (runtime.kv_dtype)");
  cmd->add_option("--max-batch", o.max_batch, "concurrent sequences (runtime.max_batch)");
  cmd->add_option("--max-context", o.max_context, "tokens per sequence (runtime.max_context)");
  cmd->add_option("--kv-block-size", o.kv_block_size, "tokens per KV-cache block (runtime.kv_block_size)");
  cmd->add_option("--kv-blocks", o.kv_blocks,
                  "KV-cache blocks in the pool, 0 = max_batch x max_context worth (runtime.kv_blocks)");
  cmd->add_option("--prefix-cache", o.prefix_cache, "on | off (runtime.prefix_cache)");
  cmd->add_option("--chat", o.chat, "on | off: the chat template interpreter (runtime.chat; default on for serve)");
  cmd->add_option("--chunked-prefill", o.chunked_prefill, "prefill chunk in tokens, 0 = off (runtime.chunked_prefill)");
  cmd->add_option("--ttft-ms", o.ttft_ms, "target time to first token (targets.ttft_ms)");
  cmd->add_option("--tpot-ms", o.tpot_ms, "target time per output token (targets.tpot_ms)");
  cmd->add_option("--throughput", o.throughput_tok_s, "target tokens/s (targets.throughput_tok_s)");
  cmd->add_option("--memory-mb", o.memory_mb, "target peak memory (targets.memory_mb)");
}

Constraints resolve(const std::optional<fs::path>& file, const Overrides& o) {
  Constraints c;
  c.source = "command line";
  if (file) c = load_file(*file);
  if (o.model) c.model = fs::absolute(*o.model).lexically_normal();
  if (o.platform) c.platform = *o.platform;
  if (o.dtype) c.dtype = *o.dtype;
  if (o.threads) c.threads = *o.threads;
  if (o.tensor_parallel) c.tensor_parallel = *o.tensor_parallel;
  if (o.mode) c.mode = *o.mode;
  if (o.numerics) c.numerics = *o.numerics;
  if (o.kv_dtype) c.kv_dtype = *o.kv_dtype;
  if (o.max_batch) c.max_batch = *o.max_batch;
  if (o.max_context) c.max_context = *o.max_context;
  if (o.kv_block_size) c.kv_block_size = *o.kv_block_size;
  if (o.kv_blocks) c.kv_blocks = *o.kv_blocks;
  if (o.prefix_cache) c.prefix_cache = parse_on_off("--prefix-cache", *o.prefix_cache);
  if (o.chat) c.chat = parse_on_off("--chat", *o.chat);
  if (o.chunked_prefill) c.chunked_prefill = *o.chunked_prefill;
  if (o.ttft_ms) c.targets.ttft_ms = *o.ttft_ms;
  if (o.tpot_ms) c.targets.tpot_ms = *o.tpot_ms;
  if (o.throughput_tok_s) c.targets.throughput_tok_s = *o.throughput_tok_s;
  if (o.memory_mb) c.targets.memory_mb = *o.memory_mb;
  if (o.tuning) c.tuning = *o.tuning;
  if (file && (o.model || o.platform || o.dtype || o.threads || o.tensor_parallel || o.mode || o.numerics || o.kv_dtype ||
               o.max_batch || o.max_context || o.kv_block_size || o.kv_blocks || o.prefix_cache || o.chat || o.chunked_prefill))
    c.source += " + command line";
  validate(c);
  return c;
}

int kv_element_bytes(const nlohmann::json& constraints) {
  const bool bf16 = constraints.value("numerics", "precise") == "fast" && constraints.value("kv_dtype", "f32") == "bf16";
  return bf16 ? 2 : 4;
}

void check_kv_blocks(const Constraints& c, int max_context) {
  if (c.kv_blocks == 0 || max_context <= 0 || c.kv_block_size <= 0) return;
  const int needed = (max_context + c.kv_block_size - 1) / c.kv_block_size;
  if (c.kv_blocks < needed)
    fail(c.source, ": field 'runtime.kv_blocks': ", c.kv_blocks, " blocks of ", c.kv_block_size,
         " tokens cannot hold one sequence of max_context ", max_context, " tokens; expected 0 (max_batch x max_context) "
         "or at least ", needed);
}

void validate(const Constraints& c) {
  const std::string& s = c.source;
  if (c.model.empty())
    fail(s, ": field 'model.path': required (give it in the file or with --model DIR)");
  if (!fs::is_directory(c.model))
    fail(s, ": field 'model.path': '", c.model.string(), "' is not a directory");
  if (c.platform.empty()) fail(s, ": field 'platform.name': expected \"auto\" or a platform id, got \"\"");
  check_one_of(s, "platform.dtype", c.dtype, {"auto", "bf16", "f16", "f32", "int8"});
  check_range(s, "platform.threads", c.threads, 0, 1024);
  check_range(s, "parallel.tensor_parallel", c.tensor_parallel, 1, 1024);
  check_one_of(s, "runtime.mode", c.mode, {"offline", "serve", "bench"});
  check_one_of(s, "runtime.numerics", c.numerics, {"precise", "fast"});
  check_one_of(s, "runtime.kv_dtype", c.kv_dtype, {"f32", "bf16"});
  if (c.kv_dtype == "bf16" && c.numerics != "fast")
    fail(s, ": field 'runtime.kv_dtype': bf16 is the KV cache of fast numerics, but runtime.numerics is \"", c.numerics,
         "\" (precise keeps f32 activations and an f32 cache); use numerics = \"fast\" or kv_dtype = \"f32\"");
  check_range(s, "runtime.max_batch", c.max_batch, 1, 4096);
  check_range(s, "runtime.max_context", c.max_context, 0, 1 << 24);
  if (c.mode == "serve" && c.chat == false)
    fail(s, ": field 'runtime.chat': false, but runtime mode serve answers POST /v1/chat/completions with the chat "
         "template; leave chat unset (or true) for serve");
  check_range(s, "runtime.kv_block_size", c.kv_block_size, 1, 4096);
  if ((c.kv_block_size & (c.kv_block_size - 1)) != 0)
    fail(s, ": field 'runtime.kv_block_size': expected a power of two, got ", c.kv_block_size);
  if (c.max_context > 0 && c.kv_block_size > c.max_context)
    fail(s, ": field 'runtime.kv_block_size': ", c.kv_block_size, " is larger than runtime.max_context (", c.max_context, ")");
  check_range(s, "runtime.kv_blocks", c.kv_blocks, 0, 1 << 24);
  if (c.kv_blocks != 0 && c.mode != "serve")
    fail(s, ": field 'runtime.kv_blocks': ", c.kv_blocks, " sizes the KV pool that a serve engine's requests share; mode ",
         c.mode, " runs its sequences on caches it sizes itself; leave it 0 (or use mode = \"serve\")");
  check_kv_blocks(c, c.max_context);
  check_range(s, "runtime.chunked_prefill", c.chunked_prefill, 0, c.max_context > 0 ? c.max_context : 1 << 24);
  check_range(s, "targets.ttft_ms", c.targets.ttft_ms, 0, 1e9);
  check_range(s, "targets.tpot_ms", c.targets.tpot_ms, 0, 1e9);
  check_range(s, "targets.throughput_tok_s", c.targets.throughput_tok_s, 0, 1e12);
  check_range(s, "targets.memory_mb", c.targets.memory_mb, 0, 1e12);
  for (const auto& [name, value] : c.tuning) {
    bool ok = name.rfind("MI_TUNE_", 0) == 0 && name.size() > 8;
    for (char ch : name) ok = ok && ((ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_');
    if (!ok) fail(s, ": field 'tuning.", name, "': expected a kernel parameter name MI_TUNE_[A-Z0-9_]+");
    // 0 is a legal value (MI_TUNE_ROW_STREAMS = 0); coverage checks the value against the platform's declared list.
    check_range(s, "tuning." + name, value, 0, 1 << 20);
  }
}

}  // namespace mi::constraints
