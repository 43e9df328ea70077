// Coverage detection: constraints + checkpoint + CKB -> which component covers each required contract on the chosen
// platform, and every gap (unknown architecture, a layer kind or feature with no component, a weight name with no
// mapping, an unsupported option) named by the knowledge that is missing. The JSON form (format
// "metainfer-plan/1", README "plan JSON") is what the generator, the gates and the evolution loop consume.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckb/ckb.h"
#include "constraints/constraints.h"
#include "io/model_config.h"
#include "platform/cpu_info.h"

namespace mi::coverage {

struct Requirement {
  std::string contract;                 // contract id
  std::string why;                      // "family qwen3", "runtime mode offline", "tokenizer files present", ...
  std::vector<std::string> components;  // component ids covering it on the platform (empty = gap)
  std::vector<std::string> files;       // their files
};

struct Gap {
  std::string kind;              // architecture | layer_kind | feature | weight_mapping | option | platform | component
  std::string id;                // e.g. "gated_deltanet", "Qwen3_5ForCausalLM", "tensor_parallel"
  std::string what;              // one line a person reads
  std::string missing_knowledge; // the CKB entry that would close it (e.g. "contract gated_deltanet")
  std::vector<std::string> evidence;  // what in the checkpoint/constraints showed it
};

struct Plan {
  bool covered = false;
  std::string ckb_version;
  constraints::Constraints constraints;
  // model
  std::string architecture, model_type, family;  // family empty when unknown
  std::string config_source;                     // "config.json" or "config.json: text_config"
  nlohmann::json dims;                           // vocab, hidden, layers, heads, kv heads, head_dim, ...
  std::optional<io::ModelConfig> config;         // parsed when the family is covered
  std::string weight_dtype;                      // stored dtype of the weight matrices: bf16 | f16 | f32
  std::string dtype;                             // dtype the engine computes with (resolved "auto")
  std::size_t weight_count = 0, weight_bytes = 0;
  // Fast numerics (bf16 activations) is offered for bf16 weights, except where experience withholds it
  // (fast_numerics_withheld says why, e.g. HYBRID-005 for mixture-of-experts routing).
  bool fast_numerics = false;
  std::string fast_numerics_withheld;
  // Where fast numerics is offered: the steps whose matmul inputs stay f32 in it (the family's
  // [forward].fast_f32_inputs; experience NUM-FAST-001/002), so the plan says what "fast" rounds.
  std::vector<std::string> fast_f32_inputs;
  bool tokenizer_present = false, chat_template_present = false;
  bool chat = false;  // the engine carries the chat template interpreter: runtime.chat and a template to run
  // platform
  std::string platform, kernel_level, kernel_struct;
  bool host_supported = false;
  std::vector<std::string> host_missing_features;
  int threads = 0;  // resolved (0 -> allowed CPUs)
  // result
  std::vector<Requirement> requirements;
  std::vector<Gap> gaps;
  std::vector<std::string> notes;

  nlohmann::json to_json() const;
  std::string to_text() const;
};

// Runs coverage detection. Throws mi::Error (exit 2) for impossible constraints: TP not dividing the heads, a
// context beyond the model's, a dtype the platform cannot run, an unreadable checkpoint, missing/mis-shaped weights
// of a covered family.
Plan detect(const ckb::Ckb& ckb, const constraints::Constraints& constraints, const platform::CpuInfo& cpu);

// What `plan` and `generate` do first: a constraints file (empty = none) plus command-line overrides, validated,
// then detect() on this host.
Plan plan_for(const ckb::Ckb& ckb, const std::string& constraints_file, const constraints::Overrides& overrides);

}  // namespace mi::coverage
