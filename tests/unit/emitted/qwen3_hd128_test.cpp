// The emitted model of golden case qwen3-hd128 (build/emitted/qwen3-hd128/model.h, `metainfer emit`) against its HF trace.
#include "emitted/qwen3-hd128/model.h"

#include "emitted_golden_checks.h"

namespace {
MI_EMITTED_GOLDEN_TESTS(EmittedQwen3Hd128, emitted_qwen3_hd128::Model, "qwen3-hd128", emitted_qwen3_hd128::config::kFastNumericsOffered)
}  // namespace
