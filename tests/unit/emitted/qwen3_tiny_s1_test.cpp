// The emitted model of golden case qwen3-tiny-s1 (build/emitted/qwen3-tiny-s1/model.h, `metainfer emit`) against its HF trace.
#include "emitted/qwen3-tiny-s1/model.h"

#include "emitted_golden_checks.h"

namespace {
using Model = emitted_qwen3_tiny_s1::Model;
const char* const kCase = "qwen3-tiny-s1";

TEST(EmittedQwen3TinyS1, PreciseGreedyIdsAndLogitsMatchTheTrace) { emitted_test::precise_greedy_ids_and_logits<Model>(kCase); }
TEST(EmittedQwen3TinyS1, FastTeacherForcedLogitsWithinToleranceOrRefused) {
  emitted_test::fast_teacher_forced_logits<Model>(kCase, emitted_qwen3_tiny_s1::config::kFastNumericsOffered);
}
TEST(EmittedQwen3TinyS1, ChunkedPrefillEqualsOnePrefillAndReusedSlotsStartClean) {
  emitted_test::chunked_prefill_and_reuse<Model>(kCase);
}
TEST(EmittedQwen3TinyS1, DecodeStepAllocatesNothing) { emitted_test::decode_allocates_nothing<Model>(kCase); }
TEST(EmittedQwen3TinyS1, BatchedDecodeEqualsDecodingAlone) { emitted_test::batched_decode_equals_decoding_alone<Model>(kCase); }
}  // namespace
