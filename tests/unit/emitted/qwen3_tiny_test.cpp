// The emitted model of golden case qwen3-tiny (build/emitted/qwen3-tiny/model.h, `metainfer emit`) against its HF trace.
#include "emitted/qwen3-tiny/model.h"

#include "emitted_golden_checks.h"

namespace {
MI_EMITTED_GOLDEN_TESTS(EmittedQwen3Tiny, emitted_qwen3_tiny::Model, "qwen3-tiny", emitted_qwen3_tiny::config::kFastNumericsOffered)
}  // namespace
