// The emitted model of golden case qwen3_5-tiny (build/emitted/qwen3_5-tiny/model.h, `metainfer emit`) against its HF trace.
#include "emitted/qwen3_5-tiny/model.h"

#include "emitted_golden_checks.h"

namespace {
MI_EMITTED_GOLDEN_TESTS(EmittedQwen35Tiny, emitted_qwen3_5_tiny::Model, "qwen3_5-tiny", emitted_qwen3_5_tiny::config::kFastNumericsOffered)
}  // namespace
