// Resident weights (components/model/resident_weights.h, experience OPT-031): a matrix copied out of a file mapping
// lands 64-byte aligned (2 MiB aligned when it is that large) with every byte equal, whatever the source's offset;
// the source's file pages are released (the mapping's Rss drops) yet still read back the file; a source under 2 MiB
// already on a 64-byte boundary is used where it is, a larger one is copied into 2 MiB-aligned memory all the same
// (the file mapping's 4 KiB pages cost decode its prefetchers and TLB reach); allocate_weight_array, which int8
// engines keep their quantised matrices in, aligns the same way.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "common/bf16.h"
#include "common/error.h"
#include "model/resident_weights.h"
#include "runtime/thread_pool.h"

namespace {

// A temporary file of `n` patterned bytes, mapped read-only as the engine maps a checkpoint.
struct MappedFile {
  char path[32] = "/tmp/mi-resident-XXXXXX";
  int fd = -1;
  std::size_t n = 0;
  std::vector<unsigned char> data;
  const unsigned char* p = nullptr;
  explicit MappedFile(std::size_t bytes) : n(bytes), data(bytes) {
    fd = mkstemp(path);
    for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<unsigned char>(i * 131 + 7);
    if (fd >= 0 && write(fd, data.data(), n) == ssize_t(n)) {
      void* map = mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
      if (map != MAP_FAILED) p = static_cast<const unsigned char*>(map);
    }
  }
  ~MappedFile() {
    if (p) munmap(const_cast<unsigned char*>(p), n);
    if (fd >= 0) close(fd);
    unlink(path);
  }
};

// Resident kilobytes of the mapping that starts at `p` (/proc/self/smaps), or -1 if it is not found.
long mapping_rss_kb(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      in = lo == reinterpret_cast<std::uintptr_t>(p);
      continue;
    }
    if (in && line.rfind("Rss:", 0) == 0) return std::stol(line.substr(4));
  }
  return -1;
}

TEST(ResidentWeights, CopyIsAlignedEqualAndTheSourceStillReadsBack) {
  mi::runtime::ThreadPool pool(2);
  mi::model::ResidentWeights resident;
  // Offsets as a safetensors header leaves them (multiples of 8 bytes, here 56 mod 64); a small matrix and one past
  // 2 MiB that spans several copy chunks and ends mid-page.
  for (std::size_t elements : {std::size_t(3 * 1024 + 5), std::size_t(9) << 20}) {
    const std::size_t offset = 56;
    MappedFile f(offset + elements * sizeof(mi::bf16_t) + 40);
    ASSERT_NE(f.p, nullptr);
    const auto* src = reinterpret_cast<const mi::bf16_t*>(f.p + offset);
    const mi::bf16_t* copy = resident.adopt(pool, src, elements, "w");
    ASSERT_NE(copy, src);
    const auto address = reinterpret_cast<std::uintptr_t>(copy);
    EXPECT_EQ(address % 64, 0u);
    if (elements * sizeof(mi::bf16_t) >= (std::size_t(2) << 20)) {
      EXPECT_EQ(address % (std::size_t(2) << 20), 0u);
    }
    EXPECT_EQ(std::memcmp(copy, f.data.data() + offset, elements * sizeof(mi::bf16_t)), 0);
    // The copy touched every source page; adopt released all but the two it shares with the file's other bytes.
    const long rss_kb = mapping_rss_kb(f.p), page_kb = long(sysconf(_SC_PAGESIZE) / 1024);
    ASSERT_GE(rss_kb, 0) << "mapping not found in /proc/self/smaps";
    EXPECT_LE(rss_kb, 2 * page_kb) << "source pages were not released";
    // The released source pages fault back in from the file.
    for (std::size_t i = 0; i < f.n; ++i) ASSERT_EQ(f.p[i], f.data[i]) << i;
    if (f.n > std::size_t(4) << 20) {
      EXPECT_GT(mapping_rss_kb(f.p), rss_kb);  // (a small one had no whole page)
    }
  }
}

TEST(ResidentWeights, AnEmptyOrSmallAlignedMatrixIsLeftWhereItIs) {
  mi::runtime::ThreadPool pool(1);
  mi::model::ResidentWeights resident;
  const float x = 1.0f;
  EXPECT_EQ(resident.adopt(pool, &x, 0, "empty"), &x);
  MappedFile f(64 * 1024);  // page-aligned mapping: already on a 64-byte boundary
  ASSERT_NE(f.p, nullptr);
  const auto* src = reinterpret_cast<const mi::bf16_t*>(f.p + 128);
  EXPECT_EQ(resident.adopt(pool, src, 1000, "aligned"), src);
}

TEST(ResidentWeights, AnAlignedMatrixOfTwoMebibytesOrMoreIsCopiedIntoHugePageAlignedMemory) {
  mi::runtime::ThreadPool pool(2);
  mi::model::ResidentWeights resident;
  const std::size_t huge = std::size_t(2) << 20;
  for (std::size_t bytes : {huge - 128, huge, huge + 4096 * 3 + 64}) {
    MappedFile f(128 + bytes);
    ASSERT_NE(f.p, nullptr);
    const auto* src = reinterpret_cast<const mi::bf16_t*>(f.p + 128);  // on a line
    const mi::bf16_t* got = resident.adopt(pool, src, bytes / sizeof(mi::bf16_t), "aligned");
    if (bytes < huge) {
      EXPECT_EQ(got, src) << bytes;
      continue;
    }
    ASSERT_NE(got, src) << bytes;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(got) % huge, 0u) << bytes;
    EXPECT_EQ(std::memcmp(got, f.data.data() + 128, bytes), 0) << bytes;
  }
}

// The VmFlags line of the /proc/self/smaps entry whose range holds `p`, or "" if none does.
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      in = lo <= at && at < hi;
      continue;
    }
    if (in && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

TEST(WeightArray, LargeArraysStartOnATwoMebibyteBoundarySmallOnesOnAPage) {
  const std::size_t huge = std::size_t(2) << 20, page = std::size_t(sysconf(_SC_PAGESIZE));
  const auto big = mi::model::allocate_weight_array<std::int8_t>(huge * 3 + 17, "big");
  ASSERT_NE(big.get(), nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big.get()) % huge, 0u);
  big[huge * 3 + 16] = 5;  // the last element is inside the mapping
  EXPECT_EQ(big[huge * 3 + 16], 5);
  EXPECT_EQ(big[0], 0);  // fresh anonymous memory reads as zero
  // Its whole 2 MiB extents carry the huge-page advice (VmFlags "hg", set by MADV_HUGEPAGE whatever THP's mode),
  // where the kernel has transparent huge pages at all.
  if (access("/sys/kernel/mm/transparent_hugepage", F_OK) == 0) {
    const std::string flags = vm_flags_of(big.get());
    ASSERT_FALSE(flags.empty()) << "mapping not found in /proc/self/smaps";
    EXPECT_NE((flags + " ").find(" hg "), std::string::npos) << flags;
  }
  const auto small = mi::model::allocate_weight_array<float>(100, "small");
  ASSERT_NE(small.get(), nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small.get()) % page, 0u);
  const auto none = mi::model::allocate_weight_array<float>(0, "empty");  // a valid, releasable mapping
  EXPECT_NE(none.get(), nullptr);
}

// An allocation the system refuses (here more than the address space) fails with the weight's name, the size asked
// for and the system's reason; a count whose size would wrap around is refused before any mapping is made.
TEST(WeightArray, AnAllocationThatCannotBeMadeNamesTheWeightTheSizeAndTheReason) {
  const std::string name = "model.layers.3.mlp.up_proj.weight";
  const std::size_t too_many = std::size_t(1) << 60;  // 1 EiB: beyond any x86-64 address space
  try {
    (void)mi::model::allocate_weight_array<std::int8_t>(too_many, name);
    FAIL() << "1 EiB was allocated";
  } catch (const mi::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(name), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(too_many) + " bytes"), std::string::npos) << what;
    EXPECT_NE(what.find(std::strerror(ENOMEM)), std::string::npos) << what;
  }
  try {
    (void)mi::model::allocate_weight_array<float>(std::numeric_limits<std::size_t>::max() / 2, name);
    FAIL() << "a wrapped-around size was allocated";
  } catch (const mi::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(name), std::string::npos) << what;
    EXPECT_NE(what.find("more than the address space"), std::string::npos) << what;
  }
}

}  // namespace
