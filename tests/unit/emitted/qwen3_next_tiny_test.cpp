// The emitted model of golden case qwen3_next-tiny (build/emitted/qwen3_next-tiny/model.h, `metainfer emit`) against its HF trace.
#include "emitted/qwen3_next-tiny/model.h"

#include "emitted_golden_checks.h"

namespace {
MI_EMITTED_GOLDEN_TESTS(EmittedQwen3NextTiny, emitted_qwen3_next_tiny::Model, "qwen3_next-tiny", emitted_qwen3_next_tiny::config::kFastNumericsOffered)
}  // namespace
