// The emitted model of golden case llama-tiny (build/emitted/llama-tiny/model.h, `metainfer emit`) against its HF trace.
#include "emitted/llama-tiny/model.h"

#include "emitted_golden_checks.h"

namespace {
using Model = emitted_llama_tiny::Model;
const char* const kCase = "llama-tiny";

TEST(EmittedLlamaTiny, PreciseGreedyIdsAndLogitsMatchTheTrace) { emitted_test::precise_greedy_ids_and_logits<Model>(kCase); }
TEST(EmittedLlamaTiny, FastTeacherForcedLogitsWithinToleranceOrRefused) {
  emitted_test::fast_teacher_forced_logits<Model>(kCase, emitted_llama_tiny::config::kFastNumericsOffered);
}
TEST(EmittedLlamaTiny, ChunkedPrefillEqualsOnePrefillAndReusedSlotsStartClean) {
  emitted_test::chunked_prefill_and_reuse<Model>(kCase);
}
TEST(EmittedLlamaTiny, DecodeStepAllocatesNothing) { emitted_test::decode_allocates_nothing<Model>(kCase); }
TEST(EmittedLlamaTiny, BatchedDecodeEqualsDecodingAlone) { emitted_test::batched_decode_equals_decoding_alone<Model>(kCase); }
}  // namespace
