// The emitted model of golden case qwen3_next-tiny (build/emitted/qwen3_next-tiny/model.h, `metainfer emit`) against its HF trace.
#include "emitted/qwen3_next-tiny/model.h"

#include "emitted_golden_checks.h"

namespace {
using Model = emitted_qwen3_next_tiny::Model;
const char* const kCase = "qwen3_next-tiny";

TEST(EmittedQwen3NextTiny, PreciseGreedyIdsAndLogitsMatchTheTrace) { emitted_test::precise_greedy_ids_and_logits<Model>(kCase); }
TEST(EmittedQwen3NextTiny, FastTeacherForcedLogitsWithinToleranceOrRefused) {
  emitted_test::fast_teacher_forced_logits<Model>(kCase, emitted_qwen3_next_tiny::config::kFastNumericsOffered);
}
TEST(EmittedQwen3NextTiny, ChunkedPrefillEqualsOnePrefillAndReusedSlotsStartClean) {
  emitted_test::chunked_prefill_and_reuse<Model>(kCase);
}
TEST(EmittedQwen3NextTiny, DecodeStepAllocatesNothing) { emitted_test::decode_allocates_nothing<Model>(kCase); }
TEST(EmittedQwen3NextTiny, BatchedDecodeEqualsDecodingAlone) { emitted_test::batched_decode_equals_decoding_alone<Model>(kCase); }
}  // namespace
