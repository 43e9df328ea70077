// The emitted model of golden case llama-tiny (build/emitted/llama-tiny/model.h, `metainfer emit`) against its HF trace.
#include "emitted/llama-tiny/model.h"

#include "emitted_golden_checks.h"

namespace {
MI_EMITTED_GOLDEN_TESTS(EmittedLlamaTiny, emitted_llama_tiny::Model, "llama-tiny", emitted_llama_tiny::config::kFastNumericsOffered)
}  // namespace
