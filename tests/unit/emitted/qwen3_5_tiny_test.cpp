// The emitted model of golden case qwen3_5-tiny (build/emitted/qwen3_5-tiny/model.h, `metainfer emit`) against its HF trace.
#include "emitted/qwen3_5-tiny/model.h"

#include "emitted_golden_checks.h"

namespace {
using Model = emitted_qwen3_5_tiny::Model;
const char* const kCase = "qwen3_5-tiny";

TEST(EmittedQwen35Tiny, PreciseGreedyIdsAndLogitsMatchTheTrace) { emitted_test::precise_greedy_ids_and_logits<Model>(kCase); }
TEST(EmittedQwen35Tiny, FastTeacherForcedLogitsWithinToleranceOrRefused) {
  emitted_test::fast_teacher_forced_logits<Model>(kCase, emitted_qwen3_5_tiny::config::kFastNumericsOffered);
}
TEST(EmittedQwen35Tiny, ChunkedPrefillEqualsOnePrefillAndReusedSlotsStartClean) {
  emitted_test::chunked_prefill_and_reuse<Model>(kCase);
}
TEST(EmittedQwen35Tiny, DecodeStepAllocatesNothing) { emitted_test::decode_allocates_nothing<Model>(kCase); }
TEST(EmittedQwen35Tiny, BatchedDecodeEqualsDecodingAlone) { emitted_test::batched_decode_equals_decoding_alone<Model>(kCase); }
}  // namespace
