// Why a request stopped generating (the OpenAI finish_reason is derived from it: eos and stop -> "stop",
// length -> "length"). Shared by the single-request generation loop, the scheduler and the server.
#pragma once

namespace mi::runtime {

enum class FinishReason { none, eos, stop, length, cancelled };

inline const char* to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::none: return "none";
    case FinishReason::eos: return "eos";
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
  }
  return "?";
}

}  // namespace mi::runtime
