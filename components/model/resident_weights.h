// Projection matrices copied out of the checkpoint's file mapping into memory the engine owns: 64-byte aligned
// (every row then starts on a cache line, since the 0.6B-and-up row lengths are multiples of 64 bytes) and, in
// whole 2 MiB extents, backed by transparent huge pages where the kernel offers them (madvise advice).
//
// Why: Hugging Face's safetensors writer pads its JSON header to 8 bytes only, so a checkpoint's tensors start at
// an arbitrary multiple of 8 bytes (the synth-model 0.6B checkpoint: 56 mod 64), and every 64-byte vector load of
// a row then spans two cache lines. The batched-decode kernels (8 tokens per weight load, bound by their loads as
// much as by DRAM) lose 15-20 % to that. Measured on AMD Zen 5 (EPYC "Turin" VM, 2 threads, experience OPT-031):
// harness, 28 distinct 3072 x 1024 bf16 matrices, 8 tokens, the rows where the file mapping puts them (56 mod 64)
// 340-427 GFLOP/s, copied 64-byte aligned 427-472, copied to 56 mod 64 again 382-417; one token 72-78 GB/s in all
// three. Engine (Qwen3-0.6B shape, fast, `ENGINE bench --parts batch,profile --batch 1,8 --profile-prompt 256`,
// alternated): B = 8 step 43.0-45.5 -> 35.2-39.2 ms, B = 1 and the 256-token prefill inside the host's noise.
// A small source (under 2 MiB) already on a 64-byte boundary stays where it is (mapped, shared through the page
// cache). A larger one is copied even when aligned, for its pages: the file mapping is made of 4 KiB pages, and a
// decode step that streams hundreds of MiB through 4 KiB pages pays a TLB miss per page and loses the hardware
// prefetchers at every page boundary (they do not cross pages), where the copy sits in 2 MiB pages. Measured on AMD
// Zen 5 (EPYC "Turin" VM, 2 threads), Qwen3-1.7B shape (synth-model --preset 1.7b, two shards, where about 2 GB of
// the 3.3 GB of matrices happened to start on a line and stayed mapped), fast engine, `ENGINE bench --parts profile
// --profile-prompt 64`, engines alternated over 6 rounds: decode step 74-107 ms (median 93.4) -> 64-81 (74.0), 6 of
// 6 rounds; the prefill's linears 437 -> 395 ms. The 0.6B checkpoint's tensors all sit at 56 mod 64 and were copied
// already. int8 engines keep their quantised matrices in the same kind of memory (allocate_weight_array).
// The arithmetic does not depend on where a row lives, so every result is bitwise what the mapped weights gave.
//
// Memory: each chunk's source pages are released once copied (release_mapped_range), so while loading the process
// holds the copies made so far plus about one chunk per thread, and afterwards the copies (the file's pages stay in
// the page cache, reclaimable, until the kernel needs the memory). Load time: one pass over the weights at memcpy
// speed, chunks split over the thread pool (+1.0-1.4 s per 1.2 GB on the Zen 5 VM, first touch of the memory).
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/thread_pool.h"

namespace mi::model {

// Drops the resident pages of [p, p + bytes) that lie wholly inside the range (madvise MADV_DONTNEED, POSIX/Linux
// madvise(2)): for a read-only private file mapping they are re-read from the file if touched again, so this is
// safe for tensors still read elsewhere and frees the memory of the ones copied or quantised. Only for file
// mappings: on anonymous memory the pages would read back as zeros.
inline void release_mapped_range(const void* p, std::size_t bytes) {
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(p) + bytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);  // advice: failure is harmless
}

constexpr std::size_t kWeightHugePage = std::size_t(2) << 20;

// Unmaps the memory of an allocate_weight_array() array. It unmaps the mapping it was made with and ignores the
// pointer it is handed, so a WeightArray must only ever hold what allocate_weight_array returned (never reset() it
// with other memory: assign a new allocate_weight_array() result instead).
struct WeightMemoryRelease {
  void* base = nullptr;
  std::size_t reserved = 0;
  template <class P>
  void operator()(P) const noexcept {
    if (base != nullptr) munmap(base, reserved);
  }
};
template <class T>
using WeightArray = std::unique_ptr<T[], WeightMemoryRelease>;

// `count` elements of T in fresh anonymous memory (zero pages until written) for a weight matrix that every decode
// step streams: from 2 MiB on the array starts on a 2 MiB boundary and its whole 2 MiB extents are advised
// MADV_HUGEPAGE (transparent huge pages where the kernel offers them; THP "madvise" mode, common, gives none to
// malloc'd memory), smaller arrays start on a page. `what` names the weight in an allocation error.
template <class T>
WeightArray<T> allocate_weight_array(std::size_t count, const std::string& what) {
  // A count whose bytes (or their 2 MiB rounding) do not fit a size_t would allocate a wrapped-around size.
  if (count > (std::numeric_limits<std::size_t>::max() - 2 * kWeightHugePage) / sizeof(T))
    fail(what, ": could not allocate ", count, " elements of ", sizeof(T), " bytes (more than the address space)");
  const std::size_t bytes = count * sizeof(T);
  const bool huge = bytes >= kWeightHugePage;
  // Huge pages need 2 MiB-aligned extents: reserve one more and start at the first boundary inside.
  const std::size_t whole_pages = (bytes + kWeightHugePage - 1) / kWeightHugePage * kWeightHugePage;
  const std::size_t reserve = huge ? whole_pages + kWeightHugePage : std::max<std::size_t>(bytes, 1);
  void* mapped = mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED)
    fail(what, ": could not allocate ", bytes, " bytes (", std::strerror(errno),
         "); the engine holds every projection matrix in memory (an int8 engine about half the checkpoint's size, else"
         " about its size)");
  auto* data = static_cast<std::byte*>(mapped);
  if (huge) {
    data = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(mapped) + kWeightHugePage - 1) /
                                        kWeightHugePage * kWeightHugePage);
#ifdef MADV_HUGEPAGE
    // Whole extents only: a huge page over the tail would make up to 2 MiB resident for a few bytes.
    madvise(data, bytes / kWeightHugePage * kWeightHugePage, MADV_HUGEPAGE);  // advice: no error if refused
#endif
  }
  return WeightArray<T>(reinterpret_cast<T*>(data), WeightMemoryRelease{mapped, reserve});
}

class ResidentWeights {
 public:
  ResidentWeights() = default;
  ResidentWeights(const ResidentWeights&) = delete;
  ResidentWeights& operator=(const ResidentWeights&) = delete;

  // src[0, count) as the linear layers should read it: src itself when it is empty, or under 2 MiB and already on a
  // 64-byte boundary; else a copy in owned memory (allocate_weight_array: 64-byte aligned, 2 MiB pages from 2 MiB
  // on; the file comment says why), the source's pages released as they are copied.
  // Precondition: src lies in a read-only file mapping (the checkpoint), whose released pages read back the file.
  // `name` names the tensor in an allocation error.
  template <class T>
  const T* adopt(runtime::ThreadPool& pool, const T* src, std::size_t count, const std::string& name) {
    const std::size_t bytes = count * sizeof(T);
    if (bytes == 0 || (reinterpret_cast<std::uintptr_t>(src) % kLine == 0 && bytes < kWeightHugePage)) return src;
    regions_.push_back(allocate_weight_array<std::byte>(bytes, "weight '" + name + "'"));
    std::byte* dst = regions_.back().get();
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
    release_mapped_range(from, bytes);  // the pages that straddled two chunks
    return reinterpret_cast<const T*>(dst);
  }

 private:
  static constexpr std::size_t kLine = 64;
  static constexpr std::size_t kChunk = std::size_t(1) << 20;  // a 1024 x 1024 bf16 matrix splits over 2 threads
  std::vector<WeightArray<std::byte>> regions_;
};

}  // namespace mi::model
