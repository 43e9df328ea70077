// The emitted model of golden case qwen3-tiny (build/emitted/qwen3-tiny/model.h, `metainfer emit`) against its HF trace.
#include "emitted/qwen3-tiny/model.h"

#include "emitted_golden_checks.h"

namespace {
using Model = emitted_qwen3_tiny::Model;
const char* const kCase = "qwen3-tiny";

TEST(EmittedQwen3Tiny, PreciseGreedyIdsAndLogitsMatchTheTrace) { emitted_test::precise_greedy_ids_and_logits<Model>(kCase); }
TEST(EmittedQwen3Tiny, FastTeacherForcedLogitsWithinToleranceOrRefused) {
  emitted_test::fast_teacher_forced_logits<Model>(kCase, emitted_qwen3_tiny::config::kFastNumericsOffered);
}
TEST(EmittedQwen3Tiny, ChunkedPrefillEqualsOnePrefillAndReusedSlotsStartClean) {
  emitted_test::chunked_prefill_and_reuse<Model>(kCase);
}
TEST(EmittedQwen3Tiny, DecodeStepAllocatesNothing) { emitted_test::decode_allocates_nothing<Model>(kCase); }
TEST(EmittedQwen3Tiny, KvCacheIsF32ByDefault) {
  static_assert(!emitted_qwen3_tiny::config::kBf16KvInFast, "runtime.kv_dtype defaults to f32");
  emitted_test::kv_cache_dtype_follows_the_constraints<Model>(kCase, false);
}
TEST(EmittedQwen3Tiny, BatchedDecodeEqualsDecodingAlone) { emitted_test::batched_decode_equals_decoding_alone<Model>(kCase); }
}  // namespace
