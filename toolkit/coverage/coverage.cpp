#include "coverage/coverage.h"

#include "generator/forward_steps.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "ckb/family_weights.h"
#include "ckb/glob.h"
#include "ckb/lint.h"
#include "common/bf16.h"
#include "common/error.h"
#include "common/json_file.h"
#include "generator/forward_steps.h"
#include "io/safetensors.h"
#include "platform/platform_select.h"

namespace mi::coverage {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Value at a dotted path ("rope_parameters.mrope_section") in the text config, else in the root config.
const json* lookup(const json& text, const json& root, const std::string& path) {
  for (const json* base : {&text, &root}) {
    const json* node = base;
    std::stringstream ss(path);
    std::string part;
    while (node && std::getline(ss, part, '.')) {
      if (!node->is_object()) {
        node = nullptr;
        break;
      }
      auto it = node->find(part);
      node = it == node->end() ? nullptr : &*it;
    }
    if (node) return node;
  }
  return nullptr;
}

float half_to_f32(uint16_t h) {  // IEEE 754 binary16 -> binary32
  const uint32_t sign = uint32_t(h >> 15) << 31;
  int exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exponent == 0) return std::ldexp(float(mantissa), -24) * (sign ? -1.0f : 1.0f);
  if (exponent == 31) return mantissa ? NAN : (sign ? -INFINITY : INFINITY);
  return std::ldexp(float(mantissa | 0x400), exponent - 25) * (sign ? -1.0f : 1.0f);
}

double tensor_mean(const io::TensorView& t) {
  double sum = 0;
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case io::DType::BF16: sum += bf16_to_f32(t.as<bf16_t>()[i]); break;
      case io::DType::F16: sum += half_to_f32(t.as<uint16_t>()[i]); break;
      case io::DType::F32: sum += t.as<float>()[i]; break;
    }
  }
  return n ? sum / double(n) : 0.0;
}

std::string dtype_lower(io::DType d) {
  switch (d) {
    case io::DType::BF16: return "bf16";
    case io::DType::F16: return "f16";
    case io::DType::F32: return "f32";
  }
  return "?";
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// "model.layers.17.mlp.experts.3.up_proj.weight" -> "model.layers.{L}.mlp.experts.{E}.up_proj.weight": lists of
// unmapped names stay readable for real checkpoints with hundreds of layers and experts.
std::string name_pattern(const std::string& name) {
  std::string out;
  std::stringstream ss(name);
  std::string part, prev;
  bool first = true;
  while (std::getline(ss, part, '.')) {
    const bool numeric = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    std::string piece = part;
    if (numeric) piece = prev == "layers" ? "{L}" : (prev == "experts" ? "{E}" : "{N}");
    out += (first ? "" : ".") + piece;
    first = false;
    prev = part;
  }
  return out;
}

struct SignalResult {
  bool fired = false;
  std::vector<std::string> evidence;
};

SignalResult evaluate_signal(const ckb::Signal& signal, const json& text, const json& root,
                             const io::WeightStore& store, const std::vector<std::string>& names) {
  SignalResult result;
  for (const auto& cond : signal.any) {
    std::string evidence;
    if (cond.kind == "config_present") {
      const json* v = lookup(text, root, cond.key);
      if (v && !v->is_null()) evidence = "config " + cond.key + " = " + v->dump();
    } else if (cond.kind == "config_contains") {
      const json* v = lookup(text, root, cond.key);
      const json want = json::parse(cond.value);
      if (v && ((v->is_array() && std::find(v->begin(), v->end(), want) != v->end()) || *v == want))
        evidence = "config " + cond.key + " contains " + want.dump();
    } else if (cond.kind == "config_less_than" || cond.kind == "config_greater_than") {
      const json* v = lookup(text, root, cond.key);
      const double threshold = json::parse(cond.value).get<double>();
      if (v && v->is_number()) {
        const double x = v->get<double>();
        if (cond.kind == "config_less_than" ? x < threshold : x > threshold)
          evidence = "config " + cond.key + " = " + v->dump();
      }
    } else if (cond.kind == "weight_present") {
      for (const auto& n : names)
        if (ckb::glob_match(cond.key, n)) {
          evidence = "weight " + n;
          break;
        }
    } else if (cond.kind == "weight_rows") {
      int64_t rows = -1;
      try {
        rows = ckb::eval_shape_expr(json::parse(cond.value).get<std::string>(), text, "signal " + signal.id);
      } catch (const Error&) {
        rows = -1;  // the config lacks a term: the condition cannot hold
      }
      for (const auto& n : names) {
        if (rows < 0 || !ckb::glob_match(cond.key, n)) continue;
        const io::TensorView& t = store.get(n);
        if (t.shape.size() == 2 && t.shape[0] == rows) {
          evidence = "weight " + n + " has shape " + shape_text(t.shape) + " (rows = " + json::parse(cond.value).get<std::string>() + ")";
          break;
        }
      }
    } else if (cond.kind == "norm_centred") {
      const double below = json::parse(cond.value).get<double>();
      double sum = 0;
      int count = 0;
      for (const auto& n : names) {
        if (!ckb::glob_match(cond.key, n)) continue;
        const io::TensorView& t = store.get(n);
        if (t.shape.size() != 1) continue;
        sum += tensor_mean(t);
        ++count;
      }
      if (count > 0 && sum / count < below) {
        std::ostringstream os;
        os << "mean of " << count << " norm weight vector(s) matching " << cond.key << " = " << sum / count
           << " (a plain w-norm stores weights near 1)";
        evidence = os.str();
      }
    }
    if (!evidence.empty()) {
      result.fired = true;
      result.evidence.push_back(evidence);
    }
  }
  return result;
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

}  // namespace

Plan detect(const ckb::Ckb& ckb, const constraints::Constraints& c, const platform::CpuInfo& cpu) {
  Plan plan;
  plan.constraints = c;
  plan.ckb_version = ckb.version;

  // ---- the checkpoint: config.json (text_config-aware: failure mode CONFIG-001) and the weight headers ----------
  const fs::path config_path = c.model / "config.json";
  if (!fs::exists(config_path)) fail(config_path.string(), ": not found (model.path must be a Hugging Face checkpoint directory)");
  const json root = read_json_file(config_path);
  if (!root.is_object()) fail(config_path.string(), ": expected a JSON object");
  io::check_config_bounds(root, config_path.string());  // before any size is taken from it
  const json& text = io::text_config_of(root);
  plan.config_source = &text == &root ? "config.json" : "config.json: text_config";
  const json* archs = lookup(root, text, "architectures");
  if (archs && archs->is_array() && !archs->empty() && (*archs)[0].is_string()) plan.architecture = (*archs)[0];
  if (const json* mt = lookup(text, root, "model_type"); mt && mt->is_string()) plan.model_type = *mt;
  for (const char* term : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                           "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings"}) {
    if (auto v = ckb::config_term(text, term)) plan.dims[term] = *v;
  }

  const io::WeightStore store = io::WeightStore::open(c.model);
  const std::vector<std::string> names = store.names();
  plan.weight_count = names.size();
  plan.weight_bytes = store.total_bytes();
  std::map<std::string, int> matrix_dtypes;
  for (const auto& n : names) {
    const auto& t = store.get(n);
    if (t.shape.size() == 2) ++matrix_dtypes[dtype_lower(t.dtype)];
  }
  for (const auto& [d, count] : matrix_dtypes)
    if (plan.weight_dtype.empty() || count > matrix_dtypes[plan.weight_dtype]) plan.weight_dtype = d;
  if (matrix_dtypes.size() > 1) plan.notes.push_back("the weight matrices mix dtypes; the engine computes with " + plan.weight_dtype);

  // ---- model family ----------------------------------------------------------------------------------------------
  const ckb::Family* family = plan.architecture.empty() ? nullptr : ckb.find_family_by_architecture(plan.architecture);
  if (family) {
    plan.family = family->id;
  } else {
    Gap g{"architecture", plan.architecture.empty() ? "(none)" : plan.architecture, "", "", {}};
    if (plan.architecture.empty()) {
      g.what = "config.json names no architecture (field 'architectures')";
      g.missing_knowledge = "an architectures entry in config.json";
    } else {
      g.what = "architecture " + plan.architecture + " (model_type " + plan.model_type + ") has no model-family entry in the CKB";
      g.missing_knowledge = "ckb/families entry for " + plan.architecture;
    }
    g.evidence.push_back("config.json architectures = " + (archs ? archs->dump() : std::string("absent")));
    plan.gaps.push_back(g);
  }

  // ---- layer kinds -------------------------------------------------------------------------------------------------
  const json layer_types = ckb::effective_layer_types(text);  // given, or derived from full_attention_interval
  std::map<std::string, std::vector<int>> layers_by_type;  // layer_types value -> layer indices
  if (layer_types.is_array())
    for (std::size_t i = 0; i < layer_types.size(); ++i)
      if (layer_types[i].is_string()) layers_by_type[layer_types[i].get<std::string>()].push_back(int(i));
  auto layer_list = [](const std::vector<int>& layers) {
    std::string list;
    for (int l : layers) list += (list.empty() ? "" : ",") + std::to_string(l);
    return list;
  };
  if (family && !family->layer_kinds.empty()) {
    // The family declares its layer kinds as data: a layer_types value no mixer kind matches is a gap, and every
    // step of every kind the checkpoint uses needs an entry in the generator's step table (forward_steps.cpp).
    for (const auto& [type, layers] : layers_by_type) {
      bool matched = false;
      for (const auto& k : family->layer_kinds) matched = matched || (k.role == "mixer" && (k.layer_type == "*" || k.layer_type == type));
      if (!matched)
        plan.gaps.push_back({"layer_kind", type,
                             "layer kind '" + type + "' (layers " + layer_list(layers) + ") has no layer-kind entry in family " + family->id,
                             "a [[layer_kinds]] entry in ckb/families/" + family->id + ".toml and its components",
                             {"config layer_types"}});
    }
    const int64_t n_layers = plan.dims.value("num_hidden_layers", int64_t(0));
    for (const auto& k : family->layer_kinds) {
      std::vector<int> layers;
      if (k.layer_type == "*") {
        for (int64_t l = 0; l < n_layers; ++l) layers.push_back(int(l));
      } else if (auto it = layers_by_type.find(k.layer_type); it != layers_by_type.end()) {
        layers = it->second;
      }
      if (layers.empty()) continue;
      std::vector<std::string> missing;
      for (const auto& step : k.forward)
        if (!generator::find_forward_step(step)) missing.push_back(step);
      if (missing.empty()) continue;
      std::string steps, contracts;
      for (const auto& step : missing) {
        steps += (steps.empty() ? "" : ", ") + step;
        const std::string c = ckb::step_contract(ckb, step);
        if (!c.empty() && contracts.find(c) == std::string::npos) contracts += (contracts.empty() ? "" : ", ") + c;
      }
      plan.gaps.push_back({"layer_kind", k.id,
                           "the generator has no emitter for layer kind " + k.id + " (" + k.role + ", layers " +
                               layer_list(layers) + "): steps " + steps + " (contracts " + contracts +
                               ") have no entry in the generator's step table",
                           "an entry per step in toolkit/generator/forward_steps.cpp",
                           {k.layer_type == "*" ? "every layer" : "config layer_types = " + k.layer_type}});
    }
  } else if (!layers_by_type.empty()) {
    std::set<std::string> covered_kinds;
    for (const auto& f : ckb.families) {
      if (family && &f != family) continue;
      auto it = f.config_allowed.find("layer_types");
      if (it != f.config_allowed.end())
        for (const auto& v : it->second) covered_kinds.insert(json::parse(v).get<std::string>());
    }
    for (const auto& [kind, layers] : layers_by_type) {
      if (covered_kinds.count(kind)) continue;
      plan.gaps.push_back({"layer_kind", kind,
                           "layer kind '" + kind + "' (layers " + layer_list(layers) + ") has no component" +
                               (family ? " in family " + family->id : ""),
                           "a contract and component for '" + kind + "' layers",
                           {"config layer_types"}});
    }
  }

  // ---- features the CKB knows it lacks (ckb/signals) -------------------------------------------------------------
  for (const auto& signal : ckb.signals) {
    SignalResult r = evaluate_signal(signal, text, root, store, names);
    if (!r.fired) continue;
    const ckb::Contract* contract = ckb.find_contract(signal.missing_contract);
    // Absorbed: the family's knowledge names the feature, and its contract is implemented and used by the family.
    if (contract && contract->status == "implemented" && family && has(family->requires_contracts, contract->id) &&
        has(family->features, signal.id))
      continue;
    plan.gaps.push_back({"feature", signal.id, signal.feature + ": " + signal.explain,
                         "contract " + signal.missing_contract, r.evidence});
  }

  // ---- the family's config constraints and weight map ----------------------------------------------------------
  if (family) {
    plan.config = io::parse_model_config(root, config_path.string());
    const std::size_t gaps_before_config = plan.gaps.size();
    if (has(family->requires_contracts, "moe_mlp")) {  // top-k of n experts: 1 <= k <= n, else routing cannot run
      const json* k = lookup(text, root, "num_experts_per_tok");
      const json* n = lookup(text, root, "num_experts");
      if (k && n && k->is_number_integer() && n->is_number_integer() &&
          (k->get<int64_t>() < 1 || k->get<int64_t>() > n->get<int64_t>()))
        fail(config_path.string(), ": field 'num_experts_per_tok': ", k->dump(), " experts per token; expected 1 to ",
             "num_experts (", n->dump(), ")");
    }
    for (const auto& [key, allowed] : family->config_allowed) {
      if (key == "layer_types") continue;
      if (key == "rope_scaling_types") {
        std::string type = "none";
        const json* rs = lookup(text, root, "rope_scaling");
        if (rs && rs->is_object()) {
          if (rs->contains("rope_type") && (*rs)["rope_type"].is_string()) type = (*rs)["rope_type"];
          else if (rs->contains("type") && (*rs)["type"].is_string()) type = (*rs)["type"];
          if (type == "default") type = "none";
        }
        if (!has(allowed, json(type).dump()))
          plan.gaps.push_back({"option", "rope_scaling:" + type,
                               "rope scaling type '" + type + "' is not covered for family " + family->id,
                               "rotary_embedding support for rope_type '" + type + "'", {"config rope_scaling"}});
        continue;
      }
      const json* v = lookup(text, root, key);
      if (!v || v->is_null()) continue;  // absent: the HF default, which the family entry describes
      if (!has(allowed, v->dump())) {
        std::string allowed_text;
        for (const auto& a : allowed) allowed_text += (allowed_text.empty() ? "" : ", ") + a;
        plan.gaps.push_back({"option", key,
                             "config.json " + key + " = " + v->dump() + " is not covered for family " + family->id +
                                 " (covered: " + allowed_text + ")",
                             "a component for " + key + " = " + v->dump(), {"config " + key}});
      }
    }
    const bool tied = plan.config->tie_word_embeddings;
    std::vector<std::string> problems;
    for (const auto& e : ckb::expected_weights(*family, text, tied, plan.architecture)) {
      const io::TensorView* t = store.find(e.name);
      if (!t) problems.push_back("missing tensor " + e.name + " " + shape_text(e.shape));
      else if (t->shape != e.shape)
        problems.push_back("tensor " + e.name + " has shape " + shape_text(t->shape) + ", expected " + shape_text(e.shape));
    }
    // A config value the family does not cover (a gap above) may legitimately change the weights (e.g. a dense MLP
    // in mlp_only_layers): the gap is the report then, not a list of missing tensors.
    if (!problems.empty() && plan.gaps.size() == gaps_before_config) {
      std::string msg = c.model.string() + ": the checkpoint does not match family " + family->id + " (" +
                        (tied ? "tied" : "untied") + " head):";
      for (const auto& p : problems) msg += "\n  " + p;
      fail(msg);
    }
    std::map<std::string, std::vector<std::string>> unmapped;
    for (const auto& n : names)
      if (!ckb::family_declares(*family, n, plan.architecture)) unmapped[name_pattern(n)].push_back(n);
    for (const auto& [pattern, list] : unmapped)
      plan.gaps.push_back({"weight_mapping", pattern,
                           "weight " + pattern + " (" + std::to_string(list.size()) + " tensor(s)) has no mapping in family " + family->id,
                           "a weight declaration in ckb/families/" + family->id + ".toml and the contract consuming it",
                           {list.front()}});
  } else {
    // Unknown family: name every weight pattern no family maps.
    std::map<std::string, std::vector<std::string>> unmapped;
    for (const auto& n : names) {
      bool declared = false;
      for (const auto& f : ckb.families) declared = declared || ckb::family_declares(f, n);
      if (!declared) unmapped[name_pattern(n)].push_back(n);
    }
    for (const auto& [pattern, list] : unmapped)
      plan.gaps.push_back({"weight_mapping", pattern,
                           "weight " + pattern + " (" + std::to_string(list.size()) + " tensor(s)) has no mapping in any family",
                           "a weight declaration and the contract consuming it", {list.front()}});
  }

  // ---- platform, dtype, parallelism, context -----------------------------------------------------------------------
  const ckb::Platform& platform = platform::select_platform(ckb, cpu, c.platform);
  plan.platform = platform.id;
  plan.kernel_level = platform.kernel_level;
  plan.kernel_struct = platform.kernel_struct;
  plan.host_supported = platform::host_supports(platform, cpu, &plan.host_missing_features);
  if (!plan.host_supported)
    plan.notes.push_back("this host cannot run platform " + platform.id + " (missing: " + [&] {
      std::string s;
      for (const auto& f : plan.host_missing_features) s += (s.empty() ? "" : ", ") + f;
      return s;
    }() + "): an engine can be planned and generated for it, not verified here");
  plan.threads = c.threads > 0 ? c.threads : std::max(1, cpu.allowed_cpus);

  for (const auto& [name, value] : c.tuning) {
    const auto it = std::find_if(platform.tuning.begin(), platform.tuning.end(),
                                 [&](const ckb::TuningParameter& t) { return t.parameter == name; });
    if (it == platform.tuning.end()) {
      std::string declared;
      for (const auto& t : platform.tuning) declared += (declared.empty() ? "" : ", ") + t.parameter;
      fail(c.source, ": field 'tuning.", name, "': platform ", platform.id, " declares no such kernel parameter (it has: ",
           declared.empty() ? "none" : declared, ")");
    }
    if (!std::count(it->values.begin(), it->values.end(), value)) {
      std::string allowed;
      for (int v : it->values) allowed += (allowed.empty() ? "" : ", ") + std::to_string(v);
      fail(c.source, ": field 'tuning.", name, "': expected one of ", allowed, " (ckb/platforms/", platform.id,
           ".toml), got ", value);
    }
  }

  plan.dtype = c.dtype == "auto" ? plan.weight_dtype : c.dtype;
  if (!has(platform.weight_dtypes, plan.dtype)) {
    std::string supported;
    for (const auto& d : platform.weight_dtypes) supported += (supported.empty() ? "" : ", ") + d;
    fail(c.source, ": field 'platform.dtype': platform ", platform.id, " cannot run dtype ", plan.dtype,
         " (it runs: ", supported, ")");
  }
  // int8: the engine quantises the stored bf16/f32 projections at load (contract int8_weights, required below).
  const bool int8 = plan.dtype == "int8";
  if (int8 && plan.weight_dtype != "bf16" && plan.weight_dtype != "f32")
    fail(c.source, ": field 'platform.dtype': int8 quantises bf16 or f32 weights at load; the checkpoint stores ",
         plan.weight_dtype);
  if (int8 && c.numerics == "fast")
    fail(c.source, ": field 'runtime.numerics': \"fast\" (bf16 activations) is not available with platform.dtype = "
         "\"int8\"; int8 weights run with precise (f32) activations (ckb/contracts/int8_weights.toml)");
  plan.fast_numerics = plan.dtype == "bf16";
  if (!plan.fast_numerics)
    plan.fast_numerics_withheld = "the engine's weights are not bf16";
  else if (family && has(family->requires_contracts, "moe_mlp")) {
    // Experience HYBRID-005: a routing decision is discrete, so bf16 activations flip near-tied top-k choices and
    // the logits move by whole units (qwen3_next-tiny: 1.9 - 2.5 off the oracle after 150 tokens, router in f32 or not).
    plan.fast_numerics = false;
    plan.fast_numerics_withheld = "mixture-of-experts routing flips under bf16 activations (ckb/experience HYBRID-005)";
  }
  if (plan.fast_numerics && family) plan.fast_f32_inputs = family->fast_f32_inputs;
  if (c.numerics == "fast" && !plan.fast_numerics && !int8)
    fail(c.source, ": field 'runtime.numerics': \"fast\" (bf16 activations) is not offered for this model: ",
         plan.fast_numerics_withheld, "; use \"precise\"");
  if (int8 && family && has(family->requires_contracts, "moe_mlp"))
    plan.gaps.push_back({"option", "int8_moe",
                         "int8 weights are not covered for family " + family->id +
                             ": the mixture-of-experts component (model/moe_mlp.h) reads the experts as stored",
                         "int8 expert weights in contract moe_mlp (quantised at load, like int8_weights)",
                         {"constraints platform.dtype = int8", "family " + family->id + " requires moe_mlp"}});
  if (!int8 && plan.dtype != plan.weight_dtype)
    plan.gaps.push_back({"option", "dtype_conversion",
                         "the checkpoint stores " + plan.weight_dtype + " weights but the constraints ask for " + plan.dtype +
                             "; engines compute with the stored dtype (no conversion component)",
                         "a weight-conversion component " + plan.weight_dtype + " -> " + plan.dtype,
                         {"constraints platform.dtype = " + c.dtype}});

  const int64_t heads = plan.dims.value("num_attention_heads", int64_t(0));
  const int64_t kv_heads = plan.dims.value("num_key_value_heads", int64_t(0));
  if (heads > 0 && (heads % c.tensor_parallel != 0 || kv_heads % c.tensor_parallel != 0))
    fail(c.source, ": field 'parallel.tensor_parallel': ", c.tensor_parallel, " does not divide the model's ", heads,
         " attention heads and ", kv_heads, " KV heads");
  if (!std::count(platform.tensor_parallel.begin(), platform.tensor_parallel.end(), c.tensor_parallel))
    plan.gaps.push_back({"option", "tensor_parallel",
                         "tensor-parallel size " + std::to_string(c.tensor_parallel) + " is not covered on platform " + platform.id,
                         "parallelism knowledge: tensor-parallel linear layers and a communication backend for " + platform.id,
                         {"constraints parallel.tensor_parallel = " + std::to_string(c.tensor_parallel)}});
  const int64_t max_pos = plan.dims.value("max_position_embeddings", int64_t(0));
  if (max_pos > 0 && c.max_context > max_pos)
    fail(c.source, ": field 'runtime.max_context': ", c.max_context, " exceeds the model's max_position_embeddings (",
         max_pos, ")");
  if (c.max_context == 0) {  // auto: a modest default that fits the model
    plan.constraints.max_context = int(max_pos > 0 ? std::min<int64_t>(4096, max_pos) : 4096);
    if (plan.constraints.kv_block_size > plan.constraints.max_context)
      fail(c.source, ": field 'runtime.kv_block_size': ", c.kv_block_size, " is larger than the context (",
           plan.constraints.max_context, ")");
    constraints::check_kv_blocks(plan.constraints, plan.constraints.max_context);
  }
  // The prefix cache is a layer over the KV cache (contract prefix_cache) driven by the serving loop
  // (components/server/); the offline command line runs one request at a time and has nothing to share.
  if (c.prefix_cache && family && has(family->requires_contracts, "recurrent_state"))
    plan.gaps.push_back({"option", "prefix_cache", "prefix caching cannot restore the recurrent state of family " + family->id +
                             "'s linear-attention layers (ckb/contracts/recurrent_state.toml)",
                         "recurrent-state snapshots at cached block boundaries",
                         {"constraints runtime.prefix_cache = true", "family " + family->id + " requires recurrent_state"}});
  if (c.prefix_cache && c.mode != "serve")
    plan.gaps.push_back({"option", "prefix_cache", "prefix caching is covered for runtime mode serve only (mode is " + c.mode + ")",
                         "a prefix-reusing request loop for runtime mode " + c.mode,
                         {"constraints runtime.prefix_cache = true", "constraints runtime.mode = " + c.mode}});

  // ---- required contracts ------------------------------------------------------------------------------------------
  std::vector<std::pair<std::string, std::string>> required;  // contract, why
  if (family)
    for (const auto& r : family->requires_contracts) required.push_back({r, "family " + family->id});
  for (const char* r : {"sampler", "engine_cli"}) required.push_back({r, "runtime mode " + c.mode});
  required.push_back({"bench", "every engine measures itself (`metainfer bench` drives ENGINE bench)"});
  // The command line runs one request at a time (engine/generation.h); only the server keeps several in flight.
  if (c.mode == "serve") required.push_back({"scheduler", "runtime mode serve"});
  if (plan.dtype == "int8") required.push_back({"int8_weights", "platform.dtype = int8"});
  if (c.mode == "serve") required.push_back({"server", "runtime mode serve"});
  // Only engines that ask for it carry the prefix cache (the others' server gets NoPrefixCache).
  if (c.mode == "serve" && c.prefix_cache) required.push_back({"prefix_cache", "runtime.prefix_cache"});
  plan.tokenizer_present = fs::exists(c.model / "tokenizer.json");
  if (plan.tokenizer_present) {
    required.push_back({"tokenizer", "tokenizer.json present"});
    const fs::path tc = c.model / "tokenizer_config.json";
    if (fs::exists(tc)) {
      const json tcj = read_json_file(tc);
      plan.chat_template_present = tcj.is_object() && tcj.contains("chat_template") && !tcj["chat_template"].is_null();
    }
    if (!plan.chat_template_present && fs::exists(c.model / "chat_template.jinja")) plan.chat_template_present = true;
  } else {
    plan.notes.push_back("no tokenizer files (tokenizer.json): the engine works on token ids only (--prompt-ids)");
  }
  // Chat is decided by the constraints, not by what this checkpoint carries: the template is read at run time from
  // the checkpoint the engine is given (an instruct variant of the same shape may carry one).
  plan.chat = c.wants_chat();
  if (plan.chat) {
    // One reason whether chat was set or defaulted (serve): L0 regenerates from the manifest's resolved
    // constraints, where it is always set, and plan.json must come out the same.
    required.push_back({"chat_template", "runtime.chat"});
    if (!plan.chat_template_present)
      plan.notes.push_back("runtime.chat is on but this checkpoint has no chat template (tokenizer_config.json "
                           "\"chat_template\" or chat_template.jinja): `chat` and --chat need a checkpoint that carries one");
  } else if (plan.chat_template_present) {
    plan.notes.push_back("the checkpoint has a chat template, but runtime.chat is off: the engine carries no chat "
                         "template interpreter (`chat` and `--chat` are refused); set chat = true in [runtime] for them");
  }

  for (const auto& [id, why] : required) {
    Requirement req{id, why, {}, {}};
    const ckb::Contract* contract = ckb.find_contract(id);
    if (!contract) {
      plan.gaps.push_back({"component", id, "required contract '" + id + "' (" + why + ") is not in the CKB",
                           "contract " + id, {why}});
    } else if (contract->status != "implemented") {
      plan.gaps.push_back({"component", id, "contract '" + id + "' (" + why + ") is " + contract->status + ": no component yet",
                           "a component implementing contract " + id, {why}});
    } else {
      for (const auto& comp : contract->components) {
        if (!has(comp.platforms, "any") && !has(comp.platforms, platform.id)) continue;
        req.components.push_back(comp.id);
        req.files.insert(req.files.end(), comp.files.begin(), comp.files.end());
      }
      if (req.components.empty())
        plan.gaps.push_back({"platform", id, "contract '" + id + "' has no component for platform " + platform.id,
                             "a " + platform.id + " component for contract " + id, {why}});
    }
    plan.requirements.push_back(req);
  }

  plan.covered = plan.gaps.empty();
  return plan;
}

Plan plan_for(const ckb::Ckb& ckb, const std::string& constraints_file, const constraints::Overrides& overrides) {
  std::optional<fs::path> file;
  if (!constraints_file.empty()) file = constraints_file;
  return detect(ckb, constraints::resolve(file, overrides), platform::detect_cpu());
}

json Plan::to_json() const {
  json reqs = json::array();
  for (const auto& r : requirements)
    reqs.push_back({{"contract", r.contract}, {"why", r.why}, {"components", r.components}, {"files", r.files},
                    {"covered", !r.components.empty()}});
  json gaps_json = json::array();
  for (const auto& g : gaps)
    gaps_json.push_back({{"kind", g.kind}, {"id", g.id}, {"what", g.what}, {"missing_knowledge", g.missing_knowledge},
                         {"evidence", g.evidence}});
  return {{"format", "metainfer-plan/1"},
          {"covered", covered},
          {"ckb_version", ckb_version},
          {"constraints", constraints.to_json()},
          {"model",
           {{"path", constraints.model.string()},
            {"architecture", architecture},
            {"model_type", model_type},
            {"family", family.empty() ? json(nullptr) : json(family)},
            {"config_source", config_source},
            {"dims", dims},
            {"weights", {{"count", weight_count}, {"bytes", weight_bytes}, {"dtype", weight_dtype}}},
            {"tokenizer", tokenizer_present},
            {"chat_template", chat_template_present}}},
          {"chat", chat},
          {"platform",
           {{"name", platform},
            {"kernel_level", kernel_level},
            {"kernel_struct", kernel_struct},
            {"host_supported", host_supported},
            {"host_missing_features", host_missing_features},
            {"threads", threads},
            {"dtype", dtype},
            {"fast_numerics", fast_numerics},
            {"fast_numerics_withheld", fast_numerics_withheld},
            {"fast_f32_inputs", fast_f32_inputs}}},
          {"requirements", reqs},
          {"gaps", gaps_json},
          {"notes", notes}};
}

std::string Plan::to_text() const {
  std::ostringstream out;
  out << "model     " << constraints.model.string() << "\n";
  out << "          " << (architecture.empty() ? "(no architecture)" : architecture) << " (model_type "
      << model_type << ", from " << config_source << ")";
  if (!family.empty()) out << " -> family " << family;
  out << "\n";
  if (!dims.empty()) {
    out << "          ";
    bool first = true;
    for (const auto& [k, v] : dims.items()) {
      out << (first ? "" : ", ") << k << "=" << v.dump();
      first = false;
    }
    out << "\n";
  }
  out << "weights   " << weight_count << " tensors, " << weight_bytes / (1024.0 * 1024.0) << " MiB, " << weight_dtype << "\n";
  out << "platform  " << platform << " (kernels " << kernel_level << ", dtype " << dtype << ", threads " << threads
      << (host_supported ? ", runs on this host" : ", NOT runnable on this host") << ")\n";
  out << "runtime   mode " << constraints.mode << ", numerics " << constraints.numerics
      << (constraints.kv_dtype == "bf16" ? " (bf16 KV cache)" : "");
  if (constraints.numerics == "fast" && !fast_f32_inputs.empty()) {  // the inputs kept f32 (NUM-FAST-001/002)
    out << " (f32 inputs kept:";
    for (std::size_t i = 0; i < fast_f32_inputs.size(); ++i) out << (i ? ", " : " ") << fast_f32_inputs[i];
    out << ")";
  }
  out << ", max_batch "
      << constraints.max_batch << ", max_context " << constraints.max_context << ", kv_block " << constraints.kv_block_size
      << ", kv_blocks " << (constraints.kv_blocks ? std::to_string(constraints.kv_blocks) : std::string("max_batch x max_context"))
      << ", chunked_prefill " << constraints.chunked_prefill << "\n\n";
  out << "contracts\n";
  for (const auto& r : requirements) {
    out << "  " << (r.components.empty() ? "[gap] " : "[ok]  ") << r.contract;
    if (!r.components.empty()) {
      out << " <- ";
      for (std::size_t i = 0; i < r.components.size(); ++i) out << (i ? ", " : "") << r.components[i];
    }
    out << "   (" << r.why << ")\n";
  }
  if (!gaps.empty()) {
    out << "\ngaps (" << gaps.size() << ")\n";
    for (const auto& g : gaps) {
      out << "  [" << g.kind << "] " << g.id << ": " << g.what << "\n      missing: " << g.missing_knowledge << "\n";
      for (const auto& e : g.evidence) out << "      evidence: " << e << "\n";
    }
  }
  for (const auto& n : notes) out << "\nnote: " << n;
  if (!notes.empty()) out << "\n";
  out << "\n" << (covered ? "COVERED: an engine can be generated for these constraints"
                          : "NOT COVERED: " + std::to_string(gaps.size()) + " gap(s); the evolution loop must absorb the missing knowledge")
      << "\n";
  return out.str();
}

}  // namespace mi::coverage
