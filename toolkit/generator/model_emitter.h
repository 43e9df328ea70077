// Writes the engine's model: src/engine_config.h (dimensions, layer pattern, kernel level and runtime defaults as
// constexpr values) and src/model.h (class engine::Model: the weights of exactly this model, the required-weight
// table, and the forward path written out step by step in the order the family's CKB entry gives). The emitted code
// calls component functions (components/model/*) with constants; nothing in it branches on the model family.
#pragma once
#include <string>

#include "ckb/ckb.h"
#include "coverage/coverage.h"

namespace mi::generator {

struct EmitOptions {
  std::string engine_name;
  // The C++ namespace of the emitted Model and config (engines: "engine"; `metainfer emit --namespace` lets a test
  // include several emitted models in one binary).
  std::string cpp_namespace = "engine";
};

std::string emit_engine_config(const ckb::Family& family, const coverage::Plan& plan, const EmitOptions& options);
std::string emit_model(const ckb::Family& family, const coverage::Plan& plan, const EmitOptions& options);

}  // namespace mi::generator
