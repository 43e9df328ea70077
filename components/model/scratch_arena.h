// Scratch memory for a forward step, reserved once so the decode loop allocates nothing: a bump allocator over
// one 64-byte-aligned buffer. Size it with ScratchPlan (the same sequence of take<T>(n) calls the forward will
// make), take() buffers while setting up, reset() to reuse. Running out throws instead of overrunning.
#pragma once
#include <cstddef>
#include <memory>
#include <new>

#include "common/error.h"

namespace mi::model {

inline constexpr std::size_t kScratchAlignment = 64;

inline std::size_t scratch_round_up(std::size_t bytes) {
  return (bytes + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment;
}

// Sums the aligned sizes of the buffers a forward step takes.
struct ScratchPlan {
  std::size_t bytes = 0;
  template <class T>
  ScratchPlan& add(std::size_t count) {
    bytes += scratch_round_up(count * sizeof(T));
    return *this;
  }
};

class ScratchArena {
 public:
  explicit ScratchArena(std::size_t bytes)
      : capacity_(scratch_round_up(bytes)),
        buffer_(static_cast<std::byte*>(::operator new(capacity_ == 0 ? kScratchAlignment : capacity_,
                                                       std::align_val_t(kScratchAlignment)))) {}
  ~ScratchArena() { ::operator delete(buffer_, std::align_val_t(kScratchAlignment)); }
  ScratchArena(const ScratchArena&) = delete;
  ScratchArena& operator=(const ScratchArena&) = delete;

  // `count` uninitialised T's, 64-byte aligned.
  template <class T>
  T* take(std::size_t count) {
    const std::size_t bytes = scratch_round_up(count * sizeof(T));
    if (bytes > capacity_ - used_)
      fail("scratch arena: request of ", count * sizeof(T), " bytes exceeds the ", capacity_ - used_,
           " bytes left of ", capacity_, " (size the arena with ScratchPlan)");
    T* p = reinterpret_cast<T*>(buffer_ + used_);
    used_ += bytes;
    return p;
  }
  void reset() { used_ = 0; }
  std::size_t used() const { return used_; }
  std::size_t capacity() const { return capacity_; }

 private:
  std::size_t capacity_;
  std::size_t used_ = 0;
  std::byte* buffer_;
};

}  // namespace mi::model
