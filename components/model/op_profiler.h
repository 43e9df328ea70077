// Per-operation wall time of a generated forward step (`ENGINE bench --profile`).
//
// The generated model holds an `OpProfiler*` that is null unless a profile is being taken; every emitted step is
// wrapped in an OpTimer, whose constructor and destructor test that pointer once and do nothing else when it is
// null, so a forward without profiling pays one predictable branch per op (no clock read, no store).
// Ops are small integers fixed by the generator (the model's kOpNames lists them in forward order); the time of an
// op is summed over the layers of a step, so "qkv_proj" is the q, k and v projections of every layer together.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace mi::model {

class OpProfiler {
 public:
  explicit OpProfiler(std::size_t ops) : seconds_(ops, 0.0), calls_(ops, 0) {}
  void add(int op, double seconds) {
    seconds_[std::size_t(op)] += seconds;
    ++calls_[std::size_t(op)];
  }
  void reset() {
    std::fill(seconds_.begin(), seconds_.end(), 0.0);
    std::fill(calls_.begin(), calls_.end(), 0L);
  }
  std::size_t ops() const { return seconds_.size(); }
  double seconds(int op) const { return seconds_[std::size_t(op)]; }
  long calls(int op) const { return calls_[std::size_t(op)]; }

 private:
  std::vector<double> seconds_;
  std::vector<long> calls_;
};

// Times the enclosing scope as `op` when `profiler` is not null.
class OpTimer {
 public:
  OpTimer(OpProfiler* profiler, int op) : profiler_(profiler), op_(op) {
    if (profiler_) start_ = Clock::now();
  }
  ~OpTimer() {
    if (profiler_) profiler_->add(op_, std::chrono::duration<double>(Clock::now() - start_).count());
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  using Clock = std::chrono::steady_clock;
  OpProfiler* profiler_;
  int op_;
  Clock::time_point start_{};
};

}  // namespace mi::model
