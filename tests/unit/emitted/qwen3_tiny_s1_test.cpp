// The emitted model of golden case qwen3-tiny-s1 (build/emitted/qwen3-tiny-s1/model.h, `metainfer emit`) against its HF trace.
#include "emitted/qwen3-tiny-s1/model.h"

#include "emitted_golden_checks.h"

namespace {
MI_EMITTED_GOLDEN_TESTS(EmittedQwen3TinyS1, emitted_qwen3_tiny_s1::Model, "qwen3-tiny-s1", emitted_qwen3_tiny_s1::config::kFastNumericsOffered)
}  // namespace
