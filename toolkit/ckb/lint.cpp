#include "ckb/lint.h"

#include "ckb/family_weights.h"
#include "ckb/glob.h"
#include "agents/agent_role.h"
#include "agents/path_glob.h"
#include "agents/protected_files.h"
#include "agents/tool_catalog.h"
#include "common/error.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <map>
#include <set>
#include <sstream>

namespace mi::ckb {
namespace fs = std::filesystem;

namespace {

// All "Suite.Name" of TEST/TEST_F/TEST_P/TYPED_TEST in a C++ test file.
std::vector<std::string> tests_in_file(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  static const std::regex test_macro(R"(\b(?:TEST|TEST_F|TEST_P|TYPED_TEST)\s*\(\s*(\w+)\s*,\s*(\w+)\s*\))");
  std::vector<std::string> names;
  for (std::sregex_iterator it(text.begin(), text.end(), test_macro), end; it != end; ++it)
    names.push_back((*it)[1].str() + "." + (*it)[2].str());
  return names;
}

const std::vector<std::string> kKnownLevels = {"scalar", "avx2", "avx512", "avx512bf16", "amx"};
const std::vector<std::string> kKnownFeatures = {"sse4_2",   "avx",      "avx2",        "fma",      "f16c",
                                                 "avx512f",  "avx512bw", "avx512vl",    "avx512dq", "avx512_bf16",
                                                 "amx_tile", "amx_bf16", "amx_int8"};
const std::vector<std::string> kKnownConditionKinds = {"config_contains",     "config_present", "config_less_than",
                                                       "config_greater_than", "weight_present", "weight_rows",
                                                       "norm_centred"};
const std::vector<std::string> kExtraAppliesTo = {"coverage", "generator", "gates"};

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

class Linter {
 public:
  Linter(const Ckb& ckb, const fs::path& root) : ckb_(ckb), root_(root) {}

  std::vector<Finding> run() {
    check_contracts();
    check_families();
    check_platforms();
    check_signals();
    check_experience();
    check_gates();
    check_roles();
    check_llm_roles();
    check_designs();
    return findings_;
  }

 private:
  void error(const fs::path& file, const std::string& field, const std::string& message) {
    findings_.push_back({"error", rel(file), field, message});
  }
  void warning(const fs::path& file, const std::string& field, const std::string& message) {
    findings_.push_back({"warning", rel(file), field, message});
  }
  std::string rel(const fs::path& file) const {
    std::error_code ec;
    auto r = fs::relative(file, root_, ec);
    return ec || r.empty() || r.string().rfind("..", 0) == 0 ? file.string() : r.string();
  }
  bool contract_exists(const std::string& id) const { return ckb_.find_contract(id) != nullptr; }
  bool platform_exists(const std::string& id) const { return ckb_.find_platform(id) != nullptr; }

  void check_tests(const fs::path& file, const std::string& field, const std::vector<TestRef>& refs,
                   bool missing_is_error) {
    if (refs.empty()) {
      error(file, field, "no enforcing test named");
      return;
    }
    for (std::size_t i = 0; i < refs.size(); ++i) {
      std::string why;
      if (!test_ref_resolves(refs[i], root_, &why)) {
        const std::string f = field + "[" + std::to_string(i) + "]";
        if (missing_is_error) error(file, f, why);
        else warning(file, f, why + " (contract is planned)");
      }
    }
  }

  void check_contracts() {
    std::set<std::string> ids;
    std::map<std::string, std::string> step_owner;  // a step is one contract's: coverage names it in gaps
    for (const auto& c : ckb_.contracts) {
      if (!ids.insert(c.id).second) error(c.source, "id", "duplicate contract id '" + c.id + "'");
      for (std::size_t i = 0; i < c.steps.size(); ++i)
        if (const auto [it, fresh] = step_owner.emplace(c.steps[i], c.id); !fresh)
          error(c.source, "steps[" + std::to_string(i) + "]",
                "step '" + c.steps[i] + "' is declared by contract '" + it->second + "' already");
      if (c.source.stem() != c.id) error(c.source, "id", "contract id '" + c.id + "' differs from its file name");
      if (!contains(ckb_.stages, c.stage))
        error(c.source, "stage", "unknown stage '" + c.stage + "' (ckb.toml stages)");
      if (c.status != "implemented" && c.status != "planned")
        error(c.source, "status", "expected \"implemented\" or \"planned\", got \"" + c.status + "\"");
      for (std::size_t i = 0; i < c.depends_on.size(); ++i)
        if (!contract_exists(c.depends_on[i]))
          error(c.source, "depends_on[" + std::to_string(i) + "]", "dangling reference to contract '" + c.depends_on[i] + "'");
      if (c.status == "implemented" && c.components.empty())
        error(c.source, "components", "an implemented contract names at least one component");
      for (std::size_t i = 0; i < c.components.size(); ++i) {
        const auto& comp = c.components[i];
        const std::string f = "components[" + std::to_string(i) + "]";
        for (std::size_t j = 0; j < comp.files.size(); ++j) {
          if (!fs::exists(root_ / comp.files[j]))
            error(c.source, f + ".files[" + std::to_string(j) + "]", "file '" + comp.files[j] + "' does not exist");
        }
        for (std::size_t j = 0; j < comp.platforms.size(); ++j)
          if (comp.platforms[j] != "any" && !platform_exists(comp.platforms[j]))
            error(c.source, f + ".platforms[" + std::to_string(j) + "]", "dangling reference to platform '" + comp.platforms[j] + "'");
      }
      check_tests(c.source, "tests", c.tests, c.status == "implemented");
    }
  }

  void check_shape_expr(const Family& f, const std::string& field, const std::string& expr) {
    std::string term;
    std::string products = expr;
    std::replace(products.begin(), products.end(), '+', '*');  // sums of products: every term is still between
    if (!expr.empty() && (expr.back() == '+' || expr.back() == '*'))
      error(f.source, field, "malformed shape expression '" + expr + "'");
    std::stringstream ss(products);
    while (std::getline(ss, term, '*')) {
      if (term.empty()) {
        error(f.source, field, "malformed shape expression '" + expr + "'");
        continue;
      }
      if (std::all_of(term.begin(), term.end(), ::isdigit)) continue;
      if (!is_shape_term(ckb_, term))
        error(f.source, field, "unknown config term '" + term + "' in shape expression '" + expr + "' (no contract declares it in `shape_terms`)");
    }
  }

  void check_families() {
    std::set<std::string> ids, archs;
    for (const auto& f : ckb_.families) {
      if (!ids.insert(f.id).second) error(f.source, "id", "duplicate family id '" + f.id + "'");
      for (const auto& a : f.architectures)
        if (!archs.insert(a).second) error(f.source, "architectures", "architecture '" + a + "' claimed by two families");
      for (std::size_t i = 0; i < f.requires_contracts.size(); ++i)
        if (!contract_exists(f.requires_contracts[i]))
          error(f.source, "requires[" + std::to_string(i) + "]", "dangling reference to contract '" + f.requires_contracts[i] + "'");
      for (std::size_t i = 0; i < f.weights.size(); ++i) {
        const auto& w = f.weights[i];
        const std::string field = "weights[" + std::to_string(i) + "]";
        if (!contract_exists(w.contract))
          error(f.source, field + ".contract", "weight '" + w.name + "' maps to unknown contract '" + w.contract + "'");
        else if (!contains(f.requires_contracts, w.contract))
          error(f.source, field + ".contract", "weight '" + w.name + "' maps to contract '" + w.contract + "' that the family does not require");
        if (w.shape.empty()) error(f.source, field + ".shape", "weight '" + w.name + "' has no shape");
        for (std::size_t j = 0; j < w.shape.size(); ++j)
          check_shape_expr(f, field + ".shape[" + std::to_string(j) + "]", w.shape[j]);
        if (!w.when.empty() && w.when != "tied" && w.when != "untied")
          error(f.source, field + ".when", "expected \"tied\" or \"untied\", got \"" + w.when + "\"");
        if (!w.kind.empty() && !f.find_layer_kind(w.kind))
          error(f.source, field + ".kind", "weight '" + w.name + "' names undeclared layer kind '" + w.kind + "'");
        if (!w.kind.empty() && w.name.find("{L}") == std::string::npos)
          error(f.source, field + ".kind", "weight '" + w.name + "' belongs to a layer kind but has no {L} index");
        if (!w.norm.empty() && w.norm != "w" && w.norm != "1+w")
          error(f.source, field + ".norm", "expected \"w\" or \"1+w\", got \"" + w.norm + "\"");
        if (!w.norm.empty() && w.shape.size() != 1)
          error(f.source, field + ".norm", "weight '" + w.name + "' is a norm weight but not 1-D");
        try {
          const std::string role = weight_role(w);
          // Two weights of one head variant with the same role would bind the same member.
          for (std::size_t j = 0; j < i; ++j)
            if (weight_role(f.weights[j]) == role && (f.weights[j].when.empty() || w.when.empty() || f.weights[j].when == w.when))
              error(f.source, field + ".role", "weight '" + w.name + "' has role '" + role + "', as weights[" +
                                                   std::to_string(j) + "] '" + f.weights[j].name + "' has");
        } catch (const mi::Error& e) {
          error(f.source, field + ".name", e.what());
        }
      }
      check_layer_kinds(f);
      // An ignored config field must not be one the family constrains or sizes anything by.
      for (std::size_t i = 0; i < f.config_ignored.size(); ++i) {
        const std::string& key = f.config_ignored[i];
        if (f.config_allowed.count(key) || is_shape_term(ckb_, key) || key == "architectures" ||
            key == "model_type" || key == "text_config")
          error(f.source, "config_ignored[" + std::to_string(i) + "]",
                "'" + key + "' changes the computation (the family constrains it or sizes weights by it); it cannot be ignored");
      }
      for (std::size_t i = 0; i < f.forward_layer.size(); ++i)
        if (step_contract(ckb_, f.forward_layer[i]).empty())
          error(f.source, "forward.layer[" + std::to_string(i) + "]", "unknown forward step '" + f.forward_layer[i] + "' (no contract declares it in `steps`)");
      for (std::size_t i = 0; i < f.forward_final.size(); ++i)
        if (step_contract(ckb_, f.forward_final[i]).empty())
          error(f.source, "forward.final[" + std::to_string(i) + "]", "unknown forward step '" + f.forward_final[i] + "' (no contract declares it in `steps`)");
      // A fast_f32_inputs step must be one the family runs (the generator then checks it rounds a matmul input).
      const std::vector<std::string> used = f.forward_steps();
      for (std::size_t i = 0; i < f.fast_f32_inputs.size(); ++i)
        if (!contains(used, f.fast_f32_inputs[i]))
          error(f.source, "forward.fast_f32_inputs[" + std::to_string(i) + "]",
                "step '" + f.fast_f32_inputs[i] + "' is not in the family's forward steps");
      // Without q/k norms the scores follow every bf16 rounding of the q/k/v input (experience NUM-FAST-001).
      if (contains(used, "qkv_proj") && !contains(used, "qk_norm") && !contains(f.fast_f32_inputs, "qkv_proj"))
        error(f.source, "forward.fast_f32_inputs",
              "the family runs qkv_proj without qk_norm: fast numerics must keep its input f32 (list \"qkv_proj\"; "
              "experience NUM-FAST-001)");
    }
  }

  void check_layer_kinds(const Family& f) {
    if (!f.layer_kinds.empty() && !f.forward_layer.empty())
      error(f.source, "forward.layer", "a family declares [forward].layer or [[layer_kinds]], not both");
    std::set<std::string> ids;
    for (std::size_t i = 0; i < f.layer_kinds.size(); ++i) {
      const auto& k = f.layer_kinds[i];
      const std::string field = "layer_kinds[" + std::to_string(i) + "]";
      if (!ids.insert(k.id).second) error(f.source, field + ".id", "duplicate layer kind '" + k.id + "'");
      if (k.role != "mixer" && k.role != "mlp")
        error(f.source, field + ".role", "expected \"mixer\" or \"mlp\", got \"" + k.role + "\"");
      if (k.layer_type.empty()) error(f.source, field + ".layer_type", "empty (a layer_types value, or \"*\")");
      if (k.forward.empty()) error(f.source, field + ".forward", "layer kind '" + k.id + "' has no forward steps");
      for (std::size_t j = 0; j < k.requires_contracts.size(); ++j)
        if (!contains(f.requires_contracts, k.requires_contracts[j]))
          error(f.source, field + ".requires[" + std::to_string(j) + "]",
                "contract '" + k.requires_contracts[j] + "' is not in the family's requires");
      for (std::size_t j = 0; j < k.forward.size(); ++j) {
        const std::string contract = step_contract(ckb_, k.forward[j]);
        const std::string sf = field + ".forward[" + std::to_string(j) + "]";
        if (contract.empty()) error(f.source, sf, "unknown component step '" + k.forward[j] + "' (no contract declares it in `steps`)");
        else if (!contains(f.requires_contracts, contract))
          error(f.source, sf, "step '" + k.forward[j] + "' is implemented by contract '" + contract +
                                  "', which the family does not require");
      }
    }
    // Every layer_types value the family allows has exactly one mixer kind (or a "*" mixer covers all).
    if (!f.layer_kinds.empty()) {
      const auto allowed = f.config_allowed.find("layer_types");
      if (allowed == f.config_allowed.end())
        error(f.source, "config.layer_types", "a family with layer kinds lists the layer_types values it covers");
      else
        for (const auto& v : allowed->second) {
          int mixers = 0;
          for (const auto& k : f.layer_kinds)
            if (k.role == "mixer" && (k.layer_type == "*" || "\"" + k.layer_type + "\"" == v)) ++mixers;
          if (mixers != 1)
            error(f.source, "config.layer_types", "layer_types value " + v + " has " + std::to_string(mixers) +
                                                      " mixer layer kinds (expected exactly one)");
        }
    }
    for (std::size_t i = 0; i < f.features.size(); ++i) {
      const Signal* signal = nullptr;
      for (const auto& s : ckb_.signals)
        if (s.id == f.features[i]) signal = &s;
      const std::string field = "features[" + std::to_string(i) + "]";
      if (!signal) error(f.source, field, "dangling reference to signal '" + f.features[i] + "'");
      else if (!contains(f.requires_contracts, signal->missing_contract))
        error(f.source, field, "signal '" + signal->id + "' needs contract '" + signal->missing_contract +
                                   "', which the family does not require");
    }
    for (std::size_t i = 0; i < f.name_maps.size(); ++i) {
      const auto& m = f.name_maps[i];
      const std::string field = "name_maps[" + std::to_string(i) + "]";
      if (!contains(f.architectures, m.architecture))
        error(f.source, field + ".architecture", "'" + m.architecture + "' is not one of the family's architectures");
      if (m.prefix.empty()) error(f.source, field + ".prefix", "empty prefix");
    }
  }

  void check_platforms() {
    for (const auto& p : ckb_.platforms) {
      if (p.source.stem() != p.id) error(p.source, "id", "platform id '" + p.id + "' differs from its file name");
      if (!contains(kKnownLevels, p.kernel_level)) error(p.source, "kernel_level", "unknown kernel level '" + p.kernel_level + "'");
      for (std::size_t i = 0; i < p.requires_features.size(); ++i)
        if (!contains(kKnownFeatures, p.requires_features[i]))
          error(p.source, "requires[" + std::to_string(i) + "]", "unknown CPU feature '" + p.requires_features[i] + "'");
      for (const auto& d : p.weight_dtypes)
        if (d != "bf16" && d != "f32" && d != "f16" && d != "int8") error(p.source, "weight_dtypes", "unknown dtype '" + d + "'");
      for (std::size_t i = 0; i < p.tuning.size(); ++i) {
        const auto& t = p.tuning[i];
        const std::string f = "tuning[" + std::to_string(i) + "]";
        if (t.parameter.rfind("MI_TUNE_", 0) != 0) error(p.source, f + ".parameter", "expected a name MI_TUNE_..., got '" + t.parameter + "'");
        if (t.op != "matvec" && t.op != "matmul" && t.op != "decode" && t.op != "batch")
          error(p.source, f + ".op", "expected matvec, matmul, decode or batch, got '" + t.op + "'");
        // A decode batch is at most the dot forms' 8 tokens; only a batch-alone timing can honour a minimum.
        if (t.min_tokens < 1 || t.min_tokens > 8)
          error(p.source, f + ".min_tokens", "expected 1..8 (the dot forms' largest block), got " + std::to_string(t.min_tokens));
        else if (t.min_tokens > 1 && t.op != "batch")
          error(p.source, f + ".min_tokens", "only op = \"batch\" times the engine's batch alone; op '" + t.op +
                                                 "' also times one token, which a minimum of " + std::to_string(t.min_tokens) + " excludes");
        if (t.values.size() < 2) error(p.source, f + ".values", "a tuning parameter needs at least two values to choose from");
        if (std::find(t.values.begin(), t.values.end(), t.default_value) == t.values.end()) error(p.source, f + ".default", "the default is not one of the values");
        for (const auto& n : t.numerics)
          if (n != "precise" && n != "fast") error(p.source, f + ".numerics", "expected precise or fast, got '" + n + "'");
        for (const auto& d : t.dtypes) {
          if (d != "bf16" && d != "int8") error(p.source, f + ".dtypes", "expected bf16 or int8 (what the timing program runs), got '" + d + "'");
          else if (!contains(p.weight_dtypes, d)) error(p.source, f + ".dtypes", "'" + d + "' is not one of the platform's weight_dtypes");
        }
      }
    }
  }

  void check_signals() {
    for (const auto& s : ckb_.signals) {
      if (s.missing_contract.empty()) error(s.source, "signal " + s.id, "names no missing contract");
      for (std::size_t i = 0; i < s.any.size(); ++i)
        if (!contains(kKnownConditionKinds, s.any[i].kind))
          error(s.source, "signal " + s.id + ".any[" + std::to_string(i) + "]", "unknown condition kind '" + s.any[i].kind + "'");
    }
  }

  void check_experience() {
    std::set<std::string> ids;
    for (const auto& e : ckb_.experience) {
      if (!ids.insert(e.id).second) error(e.source, e.kind + " " + e.id, "duplicate experience id");
      check_tests(e.source, e.kind + " " + e.id + ".guarded_by", e.guarded_by, true);
      for (const auto& a : e.applies_to) {
        bool known = contract_exists(a) || contains(kExtraAppliesTo, a);
        for (const auto& s : ckb_.signals) known = known || s.missing_contract == a;
        if (!known) error(e.source, e.kind + " " + e.id + ".applies_to", "dangling reference to '" + a + "'");
      }
    }
  }

  void check_gates() {
    for (const auto& g : ckb_.gates) {
      if (!fs::exists(root_ / g.enforced_by))
        error(g.source, "gate " + g.id + ".enforced_by", "file '" + g.enforced_by + "' does not exist");
      check_tests(g.source, "gate " + g.id + ".guarded_by", g.guarded_by, true);
      if (g.stage != "all" && !contains(ckb_.stages, g.stage))
        error(g.source, "gate " + g.id + ".stage", "unknown stage '" + g.stage + "'");
    }
  }

  // The role table's separation: only the verifier (the gate runner) declares PASS or FAIL.
  void check_roles() {
    for (const auto& r : ckb_.roles) {
      const bool may_declare = !contains(r.may_not, "declare PASS or FAIL");
      if (may_declare && r.id != agents::kVerifierRole)
        error(r.source, "role " + r.id + ".may_not", "only the verifier may declare PASS or FAIL");
      if (!may_declare && r.id == agents::kVerifierRole)
        error(r.source, "role verifier.may_not", "the verifier must be allowed to declare PASS or FAIL");
    }
  }

  // ckb/roles/*.toml: the LLM roles the tool sandbox runs. A grant the sandbox does not implement, a write path
  // reaching a protected file, or a missing role would make the separation of roles a fiction, so each is an error.
  void check_llm_roles() {
    const fs::path dir = ckb_.root / "roles";
    std::set<std::string> seen;
    std::error_code absent;  // no roles directory: every required role is reported missing below
    for (const auto& entry : fs::directory_iterator(dir, absent)) {
      if (!entry.is_regular_file() || entry.path().extension() != ".toml") continue;
      const fs::path& file = entry.path();
      agents::AgentRoleSpec r;
      try {
        r = agents::load_role(file);
      } catch (const Error& e) {
        error(file, "", e.what());
        continue;
      }
      if (r.id != file.stem().string()) error(file, "id", "role id '" + r.id + "' differs from the file name");
      if (!seen.insert(r.id).second) error(file, "id", "duplicate role '" + r.id + "'");
      // The verifier's row is code, and only its row: an LLM claiming it, or another role declared code, would let
      // something other than the gate runner judge.
      if (r.id == agents::kVerifierRole && r.is_llm())
        error(file, "kind", "the verifier is the gate runner, not an LLM role: its file must be kind = \"code\" with no prompt or tools");
      if (r.id != agents::kVerifierRole && !r.is_llm())
        error(file, "kind", "only the verifier is code; role '" + r.id + "' must be an LLM role");
      if (r.responsibility.empty()) error(file, "responsibility", "empty responsibility");
      if (!r.is_llm()) continue;
      if (r.prompt.find_first_not_of(" \n\t") == std::string::npos) error(file, "prompt", "empty prompt");
      bool writes = false;
      for (std::size_t i = 0; i < r.tools.size(); ++i) {
        if (!agents::is_known_tool(r.tools[i]))
          error(file, "tools[" + std::to_string(i) + "]", "unknown tool '" + r.tools[i] + "'");
        writes = writes || agents::is_write_tool(r.tools[i]);
      }
      if (writes && r.write_paths.empty()) error(file, "write_paths", "the role has a write tool but no write_paths");
      if (!writes && !r.write_paths.empty()) error(file, "write_paths", "write_paths without a write tool");
      // A representative path under each protected glob ("tests/**" -> "tests/x") must stay unwritable.
      std::vector<std::string> guarded = agents::default_protected_globs();
      for (const auto& g : agents::workflow_record_globs()) guarded.push_back(g);
      for (std::size_t i = 0; i < r.write_paths.size(); ++i)
        for (const std::string& glob : guarded)
          for (const char* filler : {"x", "x.cpp", "x.h", "x.toml", "x.sh", "x.py", "x.json", "x/y.cpp"}) {
            std::string sample = glob;
            for (std::size_t at; (at = sample.find("**")) != std::string::npos;) sample.replace(at, 2, filler);
            if (agents::path_glob_match(r.write_paths[i], sample)) {
              error(file, "write_paths[" + std::to_string(i) + "]", "'" + r.write_paths[i] + "' reaches protected path '" + sample + "'");
              break;
            }
          }
    }
    for (const auto& id : agents::required_role_ids())
      if (!seen.count(id)) error(dir, "role " + id, "missing role file " + id + ".toml");
    if (!seen.count(agents::kVerifierRole))
      error(dir, "role verifier", "missing role file verifier.toml (the role table's code row: the gate runner)");
  }

  void check_designs() {
    for (const auto& d : ckb_.designs)
      for (const auto& c : d.contracts)
        if (!contract_exists(c)) error(ckb_.root / "framework", "design " + d.id + ".contracts", "dangling reference to contract '" + c + "'");
  }

  const Ckb& ckb_;
  fs::path root_;
  std::vector<Finding> findings_;
};

}  // namespace

std::vector<Finding> lint(const Ckb& ckb, const fs::path& repo_root) { return Linter(ckb, repo_root).run(); }

bool test_ref_resolves(const TestRef& ref, const fs::path& repo_root, std::string* why) {
  const fs::path path = repo_root / ref.file;
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::recursive_directory_iterator(path, ec))
      if (entry.is_regular_file() && entry.path().extension() == ".cpp") files.push_back(entry.path());
  } else if (fs::is_regular_file(path, ec)) {
    files.push_back(path);
  } else {
    if (why) *why = "test file '" + ref.file + "' does not exist";
    return false;
  }
  for (const auto& f : files)
    for (const auto& name : tests_in_file(f))
      if (ref.name == "*" || glob_match(ref.name, name)) return true;
  if (why) *why = "no test matching '" + ref.name + "' in '" + ref.file + "'";
  return false;
}

std::string step_contract(const Ckb& ckb, const std::string& step) {
  for (const auto& c : ckb.contracts)
    if (contains(c.steps, step)) return c.id;
  return "";
}

bool is_shape_term(const Ckb& ckb, const std::string& term) {
  for (const auto& c : ckb.contracts)
    if (contains(c.shape_terms, term)) return true;
  return false;
}

}  // namespace mi::ckb
