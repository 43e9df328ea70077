// The emitted model of golden case qwen3-hd128 (build/emitted/qwen3-hd128/model.h, `metainfer emit`) against its HF trace.
#include "emitted/qwen3-hd128/model.h"

#include "emitted_golden_checks.h"

namespace {
using Model = emitted_qwen3_hd128::Model;
const char* const kCase = "qwen3-hd128";

TEST(EmittedQwen3Hd128, PreciseGreedyIdsAndLogitsMatchTheTrace) { emitted_test::precise_greedy_ids_and_logits<Model>(kCase); }
TEST(EmittedQwen3Hd128, FastTeacherForcedLogitsWithinToleranceOrRefused) {
  emitted_test::fast_teacher_forced_logits<Model>(kCase, emitted_qwen3_hd128::config::kFastNumericsOffered);
}
TEST(EmittedQwen3Hd128, ChunkedPrefillEqualsOnePrefillAndReusedSlotsStartClean) {
  emitted_test::chunked_prefill_and_reuse<Model>(kCase);
}
TEST(EmittedQwen3Hd128, DecodeStepAllocatesNothing) { emitted_test::decode_allocates_nothing<Model>(kCase); }
TEST(EmittedQwen3Hd128, BatchedDecodeEqualsDecodingAlone) { emitted_test::batched_decode_equals_decoding_alone<Model>(kCase); }
}  // namespace
