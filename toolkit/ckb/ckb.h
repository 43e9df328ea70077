// The Contract Knowledge Base in memory: every layer of ckb/ parsed from TOML into plain structs.
// Loading checks structure (required fields, types) and names the file and field of any problem; cross-references
// (contract ids, test files, component files) are checked by lint (ckb/lint.h), so a half-written CKB still loads
// far enough for `metainfer ckb check` to report everything at once.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mi::ckb {

// A test that enforces something: a file (or a directory, ending in '/') under the repository root and a
// GoogleTest name pattern "Suite.Name" ('*' matches any run of characters; "*" alone = any test in the file/dir).
struct TestRef {
  std::string file;
  std::string name;
};

struct Component {
  std::string id;                    // e.g. "model/rmsnorm"
  std::vector<std::string> files;    // repository-relative; a path ending in '/' means the whole directory
  std::vector<std::string> platforms;  // platform ids, or "any"
};

struct Contract {
  std::filesystem::path source;  // file it was read from
  std::string id, title, stage, status, summary;  // status: "implemented" | "planned"
  std::vector<std::string> depends_on;
  // The forward steps this contract's components implement (what a family's [forward] and [[layer_kinds]] lists
  // name; the generator's step table, toolkit/generator/forward_steps.cpp, holds the code of each), and the config
  // terms its weight shapes and dimensions use. The vocabulary of families, read by lint, coverage and the tests.
  std::vector<std::string> steps;
  std::vector<std::string> shape_terms;
  std::vector<Component> components;
  std::vector<TestRef> tests;
};

struct WeightDecl {
  std::string name;                // may contain {L} (layer) and {E} (expert, 0 .. num_experts-1)
  std::vector<std::string> shape;  // config expressions: sums of products of config terms and integers,
                                   // e.g. "hidden_size", "num_attention_heads*head_dim", "2*a*b+c*d"
  std::string contract;
  std::string when;                // "", "tied", "untied"
  std::string kind;                // "" = every layer; else a layer-kind id: {L} runs over that kind's layers only
  std::string norm;                // norm weights: "w" (y = w * x / rms) or "1+w" (zero-centred); "" = not a norm
  // What the weight is to the generated model (the member the step table's code names, e.g. self_attn_q_proj,
  // embed_tokens); "" = derived from the name (weight_role in family_weights.h). A family whose checkpoint names
  // differ from the ones the steps use sets it per weight.
  std::string role;
};

// A kind of layer (or of layer part) the family mixes, as data: which layers it occupies (the config.json
// layer_types value it matches, "*" = every layer), the contracts that implement it and its forward steps in order.
// Families whose layers are all alike may declare none and use [forward].layer instead.
struct LayerKind {
  std::string id;                    // e.g. "gated_deltanet", "gated_attention", "moe_mlp"
  std::string layer_type;            // layer_types value, or "*"
  std::string role;                  // "mixer" (token mixing) | "mlp" (channel mixing)
  std::string summary;
  std::vector<std::string> requires_contracts;
  std::vector<std::string> forward;  // steps (lint: known component steps, each naming its contract)
};

// A checkpoint layout of the same family under another architecture name (e.g. a multimodal wrapper whose text
// tower is this family): weight names starting with `prefix` are stored under `replacement` instead; tensors
// matching an `ignore` glob (another tower) are not the family's and are not loaded.
struct NameMap {
  std::string architecture, prefix, replacement;
  std::vector<std::string> ignore;
};

struct Family {
  std::filesystem::path source;
  std::string id, title, status, summary;
  std::vector<std::string> architectures, model_types;
  std::map<std::string, std::vector<std::string>> config_allowed;  // key -> allowed values as JSON text
  // config.json fields that cannot change the computation (config_ignored): a generated engine compares every
  // other field of a checkpoint's config.json with the one it was generated for and refuses a difference.
  std::vector<std::string> config_ignored;
  std::map<std::string, std::string> architecture;                 // norm, qk_norm, rope, attention, mlp, ...
  std::vector<std::string> requires_contracts;
  std::vector<std::string> forward_layer, forward_final;
  // [forward].fast_f32_inputs: steps whose matmul inputs stay f32 in fast numerics, where this family's models
  // amplify bf16 rounding beyond the fast bound (experience NUM-FAST-001/002). Every other matmul input is rounded.
  std::vector<std::string> fast_f32_inputs;
  std::vector<LayerKind> layer_kinds;  // empty: every layer is [forward].layer
  // Signal ids (ckb/signals) whose feature this family's knowledge and components handle: such a signal firing on
  // the family's checkpoint is no gap when its missing_contract is implemented and required by the family.
  std::vector<std::string> features;
  std::vector<NameMap> name_maps;
  std::vector<WeightDecl> weights;

  const LayerKind* find_layer_kind(const std::string& id) const;
  // Every forward step the family runs: [forward].layer, [forward].final and each layer kind's forward (repeats kept).
  std::vector<std::string> forward_steps() const;
  // The name map of `architecture`, or nullptr when the checkpoint uses the declared names.
  const NameMap* name_map_for(const std::string& architecture) const;
  std::map<std::string, std::map<std::string, std::string>> presets;  // preset -> key -> value (TOML text)
  std::map<std::string, std::string> preset_defaults;
};

// A kernel parameter the platform's kernels read at build time (a -D define), with the values `generate --tune`
// times and the default the kernels use when it is not set.
struct TuningParameter {
  std::string parameter;  // MI_TUNE_...
  // What the timing program runs: "matvec" (decode linears, one token) | "decode" (one token, then the engine's
  // decode batch) | "batch" (the engine's decode batch alone) | "matmul" (prefill linears).
  std::string op;
  std::vector<int> values;
  int default_value = 0;
  std::string summary;
  std::vector<std::string> numerics;  // "precise" / "fast": the modes whose kernels read it; empty = both
  // Weight dtypes whose kernels read it and the timing program can time: "bf16", "int8"; empty = bf16 only.
  std::vector<std::string> dtypes;
  // The fewest tokens a dot-form block must compute for the kernels to read the parameter (MI_TUNE_BATCH_PREFETCH:
  // 4, components/kernels/row_streams.h kBatchPrefetchTokens). An engine whose max_batch is smaller keeps the default
  // untimed: its decode never runs such blocks (only a prefill of 4 to 8 tokens does).
  int min_tokens = 1;
};

struct Platform {
  std::filesystem::path source;
  std::string id, title, arch, kernel_level, kernel_struct, summary;
  int priority = 0;
  std::vector<std::string> requires_features, compile_flags, weight_dtypes;
  std::vector<int> tensor_parallel;
  std::vector<TuningParameter> tuning;
};

// One condition of a signal; exactly one kind is set (see ckb/signals/*.toml).
struct SignalCondition {
  std::string kind;   // config_contains | config_present | config_less_than | config_greater_than |
                      // weight_present | weight_rows | norm_centred
  std::string key;    // config key path or weight glob
  std::string value;  // JSON text of the value / threshold / rows expression
};

struct Signal {
  std::filesystem::path source;
  std::string id, feature, missing_contract, explain;
  std::vector<SignalCondition> any;
};

struct ExperienceEntry {
  std::filesystem::path source;
  std::string kind;  // "failure_mode" | "rule"
  std::string id, title, rule;
  std::vector<std::string> applies_to;
  std::vector<TestRef> guarded_by;
};

struct Gate {
  std::filesystem::path source;
  std::string id, level, stage, title, enforced_by;
  std::vector<std::string> criteria;
  std::vector<TestRef> guarded_by;
  std::map<std::string, double> bounds;  // [gate.bounds]: the numbers the gate runner applies (tolerances, sizes)
};

// A row of the role table (ckb/roles/<id>.toml, read with agents::load_role): what the lint of role separation
// needs. kind "llm" or "code" (the verifier: the gate runner).
struct AgentRole {
  std::filesystem::path source;
  std::string id, kind, responsibility;
  std::vector<std::string> tools, may_not;
};

struct Design {
  std::string id, title, design;
  std::vector<std::string> contracts;
};

struct Ckb {
  std::filesystem::path root;  // the ckb/ directory
  std::string version;
  std::vector<std::string> stages;
  std::vector<Contract> contracts;
  std::vector<Family> families;
  std::vector<Platform> platforms;
  std::vector<Signal> signals;
  std::vector<ExperienceEntry> experience;
  std::vector<Gate> gates;
  std::vector<AgentRole> roles;
  std::vector<Design> designs;

  const Contract* find_contract(const std::string& id) const;
  const Family* find_family_by_architecture(const std::string& architecture) const;
  const Family* find_family(const std::string& id) const;
  const Platform* find_platform(const std::string& id) const;
};

// Loads ckb_dir (the directory holding ckb.toml). Throws mi::Error naming file and field on structural problems.
Ckb load(const std::filesystem::path& ckb_dir);

// The CKB directory to use: $METAINFER_CKB if set, else <source dir>/ckb.
std::filesystem::path default_ckb_dir();
// The repository root that component and test paths in the CKB are relative to: the source tree metainfer was
// built from.
std::filesystem::path default_repo_root();

}  // namespace mi::ckb
