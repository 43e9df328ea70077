// Projection matrices copied out of the checkpoint's file mapping into memory the engine owns: 64-byte aligned
// (every row then starts on a cache line, since the 0.6B-and-up row lengths are multiples of 64 bytes) and, for
// tensors of 2 MiB and more, backed by transparent huge pages where the kernel offers them (madvise advice).
//
// Why: Hugging Face's safetensors writer pads its JSON header to 8 bytes only, so a checkpoint's tensors start at
// an arbitrary multiple of 8 bytes (the synth-model 0.6B checkpoint: 56 mod 64), and every 64-byte vector load of
// a row then spans two cache lines. The one-token decode kernels are bound by DRAM and do not notice; the batched
// and prefill kernels, bound by their loads, do. Measured on AMD Zen 5 (EPYC "Turin" VM, 2 threads, Qwen3-0.6B
// shape, fast engine, `ENGINE bench --parts batch,profile --batch 1,8 --profile-prompt 256`, 6 alternated rounds,
// the same binary with and without the copy): decode B = 1 21.5-26.8 -> 19.0-22.5 ms per step, B = 8 40.6-44.3 ->
// 33.5-36.1 ms, pp256 441-497 -> 412-471 ms; harness (28 distinct 3072 x 1024 matrices, 8 tokens): rows at 56 mod
// 64 bytes 360-427 GFLOP/s, the same rows copied aligned 444-457, copied at 56 mod 64 again 382-417 (experience
// OPT-031). The arithmetic does not depend on where a row lives, so every result is bitwise what the mapped
// weights gave.
//
// Memory: the copy replaces the file pages in the process (each chunk's source pages are released once copied,
// release_mapped_range), so the resident set stays about the weights plus one chunk while loading and the weights
// afterwards. The file's pages stay in the page cache (reclaimable), as they did before. Load time: one pass over
// the weights at memcpy speed, split over the thread pool.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/thread_pool.h"

namespace mi::model {

// Drops the resident pages of [p, p + bytes) that lie wholly inside the range (madvise MADV_DONTNEED, POSIX/Linux
// madvise(2)): for a read-only private file mapping they are re-read from the file if touched again, so this is
// safe for tensors still read elsewhere (a tied embedding's lookups) and frees the memory of the ones copied or
// quantised.
inline void release_mapped_range(const void* p, std::size_t bytes) {
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(p) + bytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);  // advice: failure is harmless
}

class ResidentWeights {
 public:
  ResidentWeights() = default;
  ResidentWeights(const ResidentWeights&) = delete;
  ResidentWeights& operator=(const ResidentWeights&) = delete;
  ~ResidentWeights() {
    for (const Region& r : regions_) munmap(r.base, r.bytes);
  }

  // A copy of src[0, count) in owned, 64-byte-aligned memory; the source's file pages are released as they are
  // copied. `name` names the tensor in an allocation error.
  template <class T>
  const T* adopt(runtime::ThreadPool& pool, const T* src, std::size_t count, const std::string& name) {
    const std::size_t bytes = count * sizeof(T);
    if (bytes == 0) return src;
    const bool huge = bytes >= kHugePage;
    // Huge pages need 2 MiB-aligned extents: reserve one more and start at the first boundary inside.
    const std::size_t reserve = huge ? (bytes + kHugePage - 1) / kHugePage * kHugePage + kHugePage : bytes;
    void* mapped = mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED)
      fail("weight '", name, "': could not allocate ", bytes, " bytes to hold it (", std::strerror(errno), ")");
    regions_.push_back({mapped, reserve});
    auto* dst = static_cast<std::byte*>(mapped);
    if (huge) {
      dst = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(mapped) + kHugePage - 1) / kHugePage *
                                         kHugePage);
#ifdef MADV_HUGEPAGE
      madvise(dst, (bytes + kHugePage - 1) / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice: no error if refused
#endif
    }
    // Chunks of kChunk bytes on the thread pool, each copied and then its source pages released.
    const auto* from = reinterpret_cast<const std::byte*>(src);
    const int chunks = int((bytes + kChunk - 1) / kChunk);
    pool.parallel_chunks(chunks, 1, [&](int, int c0, int c1) {
      for (int c = c0; c < c1; ++c) {
        const std::size_t off = std::size_t(c) * kChunk, n = std::min(kChunk, bytes - off);
        std::memcpy(dst + off, from + off, n);
        release_mapped_range(from + off, n);
      }
    });
    return reinterpret_cast<const T*>(dst);
  }

 private:
  static constexpr std::size_t kHugePage = std::size_t(2) << 20;
  static constexpr std::size_t kChunk = std::size_t(4) << 20;
  struct Region {
    void* base;
    std::size_t bytes;
  };
  std::vector<Region> regions_;
};

}  // namespace mi::model
