// What one streamed request measured, client-side, with vLLM's serving-benchmark definitions (README
// "serve-bench"): TTFT from send to the first chunk carrying content, ITL the gaps between content chunks, E2E from
// send to the last content chunk, output tokens from the final usage chunk (else the content chunks, flagged).
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace mi::servebench {

using Clock = std::chrono::steady_clock;

struct RequestResult {
  bool ok = false;
  std::string error;        // the first error, when !ok
  int http_status = 0;      // 0: no response (connection failed, timed out before headers)
  double ttft_s = 0;        // valid when content_chunks > 0
  double latency_s = 0;     // E2E; valid when content_chunks > 0
  std::vector<double> itl_s;
  int content_chunks = 0;
  std::optional<int> usage_completion_tokens;
  std::optional<int> usage_prompt_tokens;
  bool done = false;        // "data: [DONE]" arrived

  // usage.completion_tokens, else the number of content chunks.
  int output_tokens() const { return usage_completion_tokens ? *usage_completion_tokens : content_chunks; }
  bool output_tokens_from_usage() const { return usage_completion_tokens.has_value(); }
  // (E2E - TTFT) / (output tokens - 1); none for fewer than 2 output tokens.
  std::optional<double> tpot_s() const {
    const int n = output_tokens();
    if (!ok || n < 2) return std::nullopt;
    return (latency_s - ttft_s) / double(n - 1);
  }
};

}  // namespace mi::servebench
