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
// Emitted with --numerics fast --kv-dtype bf16 (CMakeLists.txt): the bf16 KV cache is on, and a fast batched step
// still equals each sequence decoding alone.
static_assert(emitted_qwen3_tiny_s1::config::kBf16KvInFast, "qwen3-tiny-s1 is emitted with runtime.kv_dtype = bf16");
TEST(EmittedQwen3TinyS1, KvCacheIsBf16InFastNumerics) {
  emitted_test::kv_cache_dtype_follows_the_constraints<Model>(kCase, emitted_qwen3_tiny_s1::config::kBf16KvInFast);
}
TEST(EmittedQwen3TinyS1, FastBatchedDecodeEqualsDecodingAlone) {
  emitted_test::batched_decode_equals_decoding_alone<Model>(kCase, true);
}
}  // namespace
