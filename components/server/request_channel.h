// What the serving loop tells the HTTP thread of one request: a queue of events (text that became final, the
// logprobs of the tokens behind it, then one final event with the finish reason and the usage), and the way back:
// a cancel flag the HTTP thread sets when its client goes away (the loop frees the request's sequence at its next
// step boundary).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mi::server {

struct TokenAlternative {
  int32_t token = 0;
  std::string text;  // the token decoded on its own
  float logprob = 0;
};

struct TokenLogprob {
  TokenAlternative chosen;
  std::vector<TokenAlternative> top;  // the most likely tokens, most likely first (as many as the request asked)
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;  // every sampled token, a final EOS id included
  int cached_tokens = 0;      // prompt tokens taken from the prefix cache
};

struct StreamEvent {
  std::string text;                    // newly final text (may be empty)
  std::vector<TokenLogprob> logprobs;  // one per token sampled since the previous event, when logprobs were asked
  std::vector<int32_t> token_ids;      // the tokens sampled since the previous event, when return_token_ids was asked
  bool finished = false;
  std::string finish_reason;           // with finished: "stop" (EOS id or stop string) or "length"
  Usage usage;                         // with finished
  std::string error;                   // with finished: the server failed this request (text says why)
};

class RequestChannel {
 public:
  // Loop side.
  void push(StreamEvent event) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(std::move(event));
    }
    ready_.notify_all();
  }

  // HTTP side: every event queued so far, waiting up to `timeout` for the first one (empty on timeout).
  std::vector<StreamEvent> take(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait_for(lock, timeout, [&] { return !events_.empty(); });
    std::vector<StreamEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
    events_.clear();
    return out;
  }

  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamEvent> events_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace mi::server
