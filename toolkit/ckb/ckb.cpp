#include "ckb/ckb.h"

#include "agents/agent_role.h"

#include <algorithm>
#include <cstdlib>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "common/error.h"

namespace mi::ckb {
namespace fs = std::filesystem;

namespace {

// Reads TOML values with errors that name the file and the field path.
class TomlReader {
 public:
  TomlReader(const fs::path& file, const toml::table& table, std::string prefix = "")
      : file_(file), table_(table), prefix_(std::move(prefix)) {}

  std::string field(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }

  [[noreturn]] void bad(const std::string& key, const std::string& expected) const {
    fail(file_.string(), ": field '", field(key), "': expected ", expected);
  }

  std::string str(const std::string& key) const {
    auto v = table_[key].value_exact<std::string>();
    if (!v) bad(key, "a string");
    return *v;
  }
  std::string str_or(const std::string& key, const std::string& fallback) const {
    if (!table_.contains(key)) return fallback;
    return str(key);
  }
  // Every key of the sub-table `key` (absent = empty) as a number.
  std::map<std::string, double> numbers(const std::string& key) const {
    std::map<std::string, double> out;
    if (!table_.contains(key)) return out;
    const toml::table* t = table_[key].as_table();
    if (!t) bad(key, "a table of numbers");
    for (const auto& [k, v] : *t) {
      const auto d = v.value<double>();
      if (!d) bad(key + "." + std::string(k.str()), "a number");
      out[std::string(k.str())] = *d;
    }
    return out;
  }
  int integer_or(const std::string& key, int fallback) const {
    if (!table_.contains(key)) return fallback;
    auto v = table_[key].value_exact<int64_t>();
    if (!v) bad(key, "an integer");
    return int(*v);
  }
  std::vector<std::string> strings(const std::string& key, bool required = false) const {
    std::vector<std::string> out;
    if (!table_.contains(key)) {
      if (required) bad(key, "an array of strings");
      return out;
    }
    const toml::array* arr = table_[key].as_array();
    if (!arr) bad(key, "an array of strings");
    for (const auto& el : *arr) {
      auto s = el.value_exact<std::string>();
      if (!s) bad(key, "an array of strings");
      out.push_back(*s);
    }
    return out;
  }
  std::vector<int> integers(const std::string& key) const {
    std::vector<int> out;
    if (!table_.contains(key)) return out;
    const toml::array* arr = table_[key].as_array();
    if (!arr) bad(key, "an array of integers");
    for (const auto& el : *arr) {
      auto v = el.value_exact<int64_t>();
      if (!v) bad(key, "an array of integers");
      out.push_back(int(*v));
    }
    return out;
  }
  // Array of tables: calls fn(reader) for each element.
  template <class Fn>
  void each_table(const std::string& key, Fn&& fn, bool required = false) const {
    if (!table_.contains(key)) {
      if (required) bad(key, "an array of tables");
      return;
    }
    const toml::array* arr = table_[key].as_array();
    if (!arr) bad(key, "an array of tables");
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const toml::table* t = (*arr)[i].as_table();
      if (!t) bad(key + "[" + std::to_string(i) + "]", "a table");
      fn(TomlReader(file_, *t, field(key) + "[" + std::to_string(i) + "]"));
    }
  }
  const toml::table* subtable(const std::string& key, bool required = false) const {
    if (!table_.contains(key)) {
      if (required) bad(key, "a table");
      return nullptr;
    }
    const toml::table* t = table_[key].as_table();
    if (!t) bad(key, "a table");
    return t;
  }
  TomlReader sub(const std::string& key, const toml::table& t) const { return TomlReader(file_, t, field(key)); }
  const toml::table& table() const { return table_; }

 private:
  const fs::path& file_;
  const toml::table& table_;
  std::string prefix_;
};

// TOML value -> the JSON text of the same value (strings quoted), so config values compare as JSON.
std::string value_as_json_text(const toml::node& node) {
  // Switch on the exact node type: toml++'s value<T>() converts between types (an integer reads as a bool).
  switch (node.type()) {
    case toml::node_type::string: return nlohmann::json(*node.value_exact<std::string>()).dump();
    case toml::node_type::boolean: return *node.value_exact<bool>() ? "true" : "false";
    case toml::node_type::integer: return std::to_string(*node.value_exact<int64_t>());
    case toml::node_type::floating_point: return nlohmann::json(*node.value_exact<double>()).dump();
    case toml::node_type::array: {  // e.g. a preset's rope_parameters.mrope_section = [11, 11, 10]
      std::string out = "[";
      bool first = true;
      for (const auto& el : *node.as_array()) {
        out += (first ? "" : ",") + value_as_json_text(el);
        first = false;
      }
      return out + "]";
    }
    default: fail("unsupported TOML value type in CKB (expected a string, boolean, number or array of them)");
  }
}

toml::table parse_file(const fs::path& file) {
  try {
    return toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    fail(file.string(), ":", e.source().begin.line, ":", e.source().begin.column, ": TOML syntax error: ",
         std::string(e.description()));
  }
}

std::vector<fs::path> toml_files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".toml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<TestRef> read_test_refs(const TomlReader& r, const std::string& key) {
  std::vector<TestRef> refs;
  r.each_table(key, [&](const TomlReader& t) { refs.push_back({t.str("file"), t.str("name")}); });
  return refs;
}

Contract read_contract(const fs::path& file) {
  const toml::table root = parse_file(file);
  TomlReader r(file, root);
  Contract c;
  c.source = file;
  c.id = r.str("id");
  c.title = r.str("title");
  c.stage = r.str("stage");
  c.status = r.str("status");
  c.summary = r.str("summary");
  c.depends_on = r.strings("depends_on");
  c.steps = r.strings("steps");
  c.shape_terms = r.strings("shape_terms");
  r.subtable("interface", true);
  r.each_table("components", [&](const TomlReader& t) {
    c.components.push_back({t.str("id"), t.strings("files", true), t.strings("platforms", true)});
  });
  c.tests = read_test_refs(r, "tests");
  return c;
}

Family read_family(const fs::path& file) {
  const toml::table root = parse_file(file);
  TomlReader r(file, root);
  Family f;
  f.source = file;
  f.id = r.str("id");
  f.title = r.str("title");
  f.status = r.str("status");
  f.summary = r.str_or("summary", "");
  f.architectures = r.strings("architectures", true);
  f.model_types = r.strings("model_types");
  if (const toml::table* cfg = r.subtable("config")) {
    for (const auto& [key, node] : *cfg) {
      const toml::array* arr = node.as_array();
      if (!arr) r.sub("config", *cfg).bad(std::string(key.str()), "an array of allowed values");
      auto& allowed = f.config_allowed[std::string(key.str())];
      for (const auto& el : *arr) allowed.push_back(value_as_json_text(el));
    }
  }
  f.config_ignored = r.strings("config_ignored");
  if (const toml::table* arch = r.subtable("architecture", true)) {
    for (const auto& [key, node] : *arch) {
      auto s = node.value_exact<std::string>();
      auto b = node.value_exact<bool>();
      f.architecture[std::string(key.str())] = s ? *s : (b ? (*b ? "true" : "false") : "");
    }
  }
  f.requires_contracts = r.strings("requires", true);
  if (const toml::table* fwd = r.subtable("forward", true)) {
    TomlReader fr = r.sub("forward", *fwd);
    f.forward_layer = fr.strings("layer", !root.contains("layer_kinds"));
    f.forward_final = fr.strings("final", true);
    f.fast_f32_inputs = fr.strings("fast_f32_inputs");
  }
  f.features = r.strings("features");
  r.each_table("layer_kinds", [&](const TomlReader& t) {
    f.layer_kinds.push_back({t.str("id"), t.str("layer_type"), t.str("role"), t.str_or("summary", ""),
                             t.strings("requires"), t.strings("forward", true)});
  });
  r.each_table("name_maps", [&](const TomlReader& t) {
    f.name_maps.push_back({t.str("architecture"), t.str("prefix"), t.str("replacement"), t.strings("ignore")});
  });
  r.each_table("weights", [&](const TomlReader& t) {
    f.weights.push_back({t.str("name"), t.strings("shape", true), t.str("contract"), t.str_or("when", ""),
                         t.str_or("kind", ""), t.str_or("norm", ""), t.str_or("role", "")});
  }, true);
  if (const toml::table* presets = r.subtable("presets")) {
    for (const auto& [name, node] : *presets) {
      const toml::table* pt = node.as_table();
      if (!pt) r.sub("presets", *presets).bad(std::string(name.str()), "a table");
      for (const auto& [key, value] : *pt) f.presets[std::string(name.str())][std::string(key.str())] = value_as_json_text(value);
    }
  }
  if (const toml::table* defaults = r.subtable("preset_defaults")) {
    for (const auto& [key, value] : *defaults) f.preset_defaults[std::string(key.str())] = value_as_json_text(value);
  }
  return f;
}

Platform read_platform(const fs::path& file) {
  const toml::table root = parse_file(file);
  TomlReader r(file, root);
  Platform p;
  p.source = file;
  p.id = r.str("id");
  p.title = r.str("title");
  p.arch = r.str("arch");
  p.kernel_level = r.str("kernel_level");
  p.kernel_struct = r.str("kernel_struct");
  p.summary = r.str_or("summary", "");
  p.priority = r.integer_or("priority", 0);
  p.requires_features = r.strings("requires", true);
  p.compile_flags = r.strings("compile_flags", true);
  p.weight_dtypes = r.strings("weight_dtypes", true);
  p.tensor_parallel = r.integers("tensor_parallel");
  r.each_table("tuning", [&](const TomlReader& t) {
    TuningParameter tp;
    tp.parameter = t.str("parameter");
    tp.op = t.str("op");
    tp.min_tokens = t.integer_or("min_tokens", 1);
    tp.values = t.integers("values");
    tp.default_value = t.integer_or("default", 0);
    tp.summary = t.str_or("summary", "");
    tp.numerics = t.strings("numerics");
    tp.dtypes = t.strings("dtypes");
    p.tuning.push_back(tp);
  });
  return p;
}

void read_signals(const fs::path& file, std::vector<Signal>& out) {
  const toml::table root = parse_file(file);
  TomlReader r(file, root);
  r.each_table("signal", [&](const TomlReader& t) {
    Signal s;
    s.source = file;
    s.id = t.str("id");
    s.feature = t.str("feature");
    s.missing_contract = t.str("missing_contract");
    s.explain = t.str_or("explain", "");
    t.each_table("any", [&](const TomlReader& c) {
      if (c.table().size() != 1) c.bad("", "exactly one condition per table");
      const auto first = c.table().begin();  // toml++ iterators own the proxy pair: keep the iterator alive
      const auto& kind_key = first->first;
      const toml::node& node = first->second;
      SignalCondition cond;
      cond.kind = std::string(kind_key.str());
      if (auto s_value = node.value_exact<std::string>()) {
        cond.key = *s_value;
      } else if (const toml::table* args = node.as_table()) {
        TomlReader a = c.sub(cond.kind, *args);
        if (args->contains("key")) cond.key = a.str("key");
        if (args->contains("weight")) cond.key = a.str("weight");
        for (const char* value_key : {"value", "rows", "below"}) {
          if (args->contains(value_key)) cond.value = value_as_json_text(*args->get(value_key));
        }
      } else {
        c.bad(cond.kind, "a string or a table");
      }
      s.any.push_back(cond);
    }, true);
    out.push_back(s);
  });
}

void read_experience(const fs::path& file, std::vector<ExperienceEntry>& out) {
  const toml::table root = parse_file(file);
  TomlReader r(file, root);
  for (const char* kind : {"failure_mode", "rule"}) {
    r.each_table(kind, [&](const TomlReader& t) {
      ExperienceEntry e;
      e.source = file;
      e.kind = kind;
      e.id = t.str("id");
      e.title = t.str_or("title", t.str_or("symptom", ""));
      e.rule = t.str("rule");
      e.applies_to = t.strings("applies_to");
      e.guarded_by = read_test_refs(t, "guarded_by");
      out.push_back(e);
    });
  }
}

void read_gates(const fs::path& file, std::vector<Gate>& out) {
  const toml::table root = parse_file(file);
  TomlReader r(file, root);
  r.each_table("gate", [&](const TomlReader& t) {
    Gate g;
    g.source = file;
    g.id = t.str("id");
    g.level = t.str("level");
    g.stage = t.str("stage");
    g.title = t.str("title");
    g.enforced_by = t.str("enforced_by");
    g.criteria = t.strings("criteria", true);
    g.guarded_by = read_test_refs(t, "guarded_by");
    g.bounds = t.numbers("bounds");
    out.push_back(g);
  });
}

void read_designs(const fs::path& file, std::vector<Design>& out) {
  const toml::table root = parse_file(file);
  TomlReader r(file, root);
  r.each_table("design", [&](const TomlReader& t) {
    out.push_back({t.str("id"), t.str("title"), t.str("design"), t.strings("contracts", true)});
  });
}

}  // namespace

Ckb load(const fs::path& ckb_dir) {
  const fs::path index = ckb_dir / "ckb.toml";
  if (!fs::exists(index)) fail(index.string(), ": not found (is ", ckb_dir.string(), " a CKB directory?)");
  const toml::table root = parse_file(index);
  TomlReader r(index, root);
  Ckb ckb;
  ckb.root = ckb_dir;
  ckb.version = r.str("version");
  ckb.stages = r.strings("stages", true);
  const toml::table* layers = r.subtable("layers", true);
  TomlReader lr = r.sub("layers", *layers);
  auto layer_dir = [&](const char* key) { return ckb_dir / lr.str(key); };

  for (const auto& f : toml_files_in(layer_dir("contracts"))) ckb.contracts.push_back(read_contract(f));
  for (const auto& f : toml_files_in(layer_dir("families"))) ckb.families.push_back(read_family(f));
  for (const auto& f : toml_files_in(layer_dir("platforms"))) ckb.platforms.push_back(read_platform(f));
  for (const auto& f : toml_files_in(layer_dir("signals"))) read_signals(f, ckb.signals);
  for (const auto& f : toml_files_in(layer_dir("experience"))) read_experience(f, ckb.experience);
  for (const auto& f : toml_files_in(layer_dir("test_contracts"))) read_gates(f, ckb.gates);
  // The role table: one file per role, the same files the agents' sandbox reads prompts and grants from. A malformed
  // file is left to lint (check_llm_roles names its field); here it is simply not a row.
  for (const auto& f : toml_files_in(layer_dir("roles"))) {
    try {
      const agents::AgentRoleSpec r = agents::load_role(f);
      ckb.roles.push_back({f, r.id, r.kind, r.responsibility, r.tools, r.may_not});
    } catch (const Error&) {
    }
  }
  for (const auto& f : toml_files_in(layer_dir("framework"))) read_designs(f, ckb.designs);
  return ckb;
}

const Contract* Ckb::find_contract(const std::string& id) const {
  for (const auto& c : contracts)
    if (c.id == id) return &c;
  return nullptr;
}
const Family* Ckb::find_family_by_architecture(const std::string& architecture) const {
  for (const auto& f : families)
    if (std::find(f.architectures.begin(), f.architectures.end(), architecture) != f.architectures.end()) return &f;
  return nullptr;
}
const Family* Ckb::find_family(const std::string& id) const {
  for (const auto& f : families)
    if (f.id == id) return &f;
  return nullptr;
}
const LayerKind* Family::find_layer_kind(const std::string& kind_id) const {
  for (const auto& k : layer_kinds)
    if (k.id == kind_id) return &k;
  return nullptr;
}
std::vector<std::string> Family::forward_steps() const {
  std::vector<std::string> steps = forward_layer;
  steps.insert(steps.end(), forward_final.begin(), forward_final.end());
  for (const auto& k : layer_kinds) steps.insert(steps.end(), k.forward.begin(), k.forward.end());
  return steps;
}
const NameMap* Family::name_map_for(const std::string& architecture) const {
  for (const auto& m : name_maps)
    if (m.architecture == architecture) return &m;
  return nullptr;
}
const Platform* Ckb::find_platform(const std::string& id) const {
  for (const auto& p : platforms)
    if (p.id == id) return &p;
  return nullptr;
}

fs::path default_ckb_dir() {
  if (const char* env = std::getenv("METAINFER_CKB"); env && *env) return env;
  return fs::path(METAINFER_SOURCE_DIR) / "ckb";
}

fs::path default_repo_root() { return fs::path(METAINFER_SOURCE_DIR); }

}  // namespace mi::ckb
