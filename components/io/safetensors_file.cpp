// One safetensors file, memory-mapped read-only (MAP_PRIVATE) so tensors are zero-copy views of the page cache.
// Mapped ranges are registered for the SIGBUS handler (install_mapped_file_sigbus_handler): a file truncated while
// it is mapped ends the process with a message naming it, not a signal death.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "io/safetensors.h"

namespace mi::io {

namespace {

// The table the SIGBUS handler reads: fixed storage (no allocation), each slot published with an atomic state so
// the handler only reads complete entries. A process maps few files; beyond kSlots a fault is still reported, without
// the file name.
struct MappedRange {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 live
  std::uintptr_t begin = 0, end = 0;
  char path[512] = {};
};
constexpr int kSlots = 256;
MappedRange g_ranges[kSlots];
std::atomic<const char*> g_program{"metainfer"};
std::atomic<const char*> g_reader{"the engine"};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<const char*>::is_always_lock_free);

int register_range(const void* data, std::size_t size, const std::string& path) {
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (!g_ranges[i].state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) continue;
    MappedRange& r = g_ranges[i];
    r.begin = reinterpret_cast<std::uintptr_t>(data);
    r.end = r.begin + size;
    const std::size_t n = std::min(path.size(), sizeof(r.path) - 1);
    std::memcpy(r.path, path.data(), n);
    r.path[n] = '\0';
    r.state.store(2, std::memory_order_release);
    return i;
  }
  return -1;
}

void unregister_range(int slot) {
  if (slot >= 0) g_ranges[slot].state.store(0, std::memory_order_release);
}

// Async-signal-safe output: write(2) only.
void put(const char* text) {
  std::size_t n = 0;
  while (text[n] != '\0') ++n;
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, text, n);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return;
    }
    text += w;
    n -= std::size_t(w);
  }
}

void on_sigbus(int, siginfo_t* info, void*) {
  const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (MappedRange& r : g_ranges) {
    if (r.state.load(std::memory_order_acquire) != 2 || address < r.begin || address >= r.end) continue;
    put(g_program.load());
    put(": error: the checkpoint file ");
    put(r.path);
    put(" changed while ");
    put(g_reader.load());
    put(" was reading it (SIGBUS at a mapped weight); the weights must not be modified while an engine runs\n");
    ::_exit(kExitMappedFileChanged);
  }
  // Not a mapped checkpoint: restore the default action; the faulting access repeats and ends the process as usual.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGBUS, &dfl, nullptr);
  if (info->si_code <= 0) ::raise(SIGBUS);  // sent by kill(), not a fault: nothing repeats by itself
}

}  // namespace

void install_mapped_file_sigbus_handler(const char* program, const char* reader) {
  g_program.store(program);
  g_reader.store(reader);
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO;
  ::sigemptyset(&action.sa_mask);
  if (::sigaction(SIGBUS, &action, nullptr) != 0) fail("cannot install the SIGBUS handler: ", std::strerror(errno));
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& file) {
  SafetensorsFile result;
  result.path_ = file;
  const std::string name = file.string();
  int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(name, ": cannot open: ", std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    int err = errno;
    ::close(fd);
    fail(name, ": cannot stat: ", std::strerror(err));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    fail(name, ": not a regular file");
  }
  result.size_ = std::size_t(info.st_size);
  if (result.size_ < 8) {
    ::close(fd);
    fail(name, ": file is ", result.size_, " bytes, too short for the 8-byte safetensors header length (truncated?)");
  }
  void* mapping = ::mmap(nullptr, result.size_, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (mapping == MAP_FAILED) fail(name, ": mmap of ", result.size_, " bytes failed: ", std::strerror(map_errno));
  result.mapping_ = mapping;
  result.registry_slot_ = register_range(mapping, result.size_, name);
  // From here on `result` owns the mapping: a parse error unmaps it in the destructor.
  result.header_ = parse_safetensors(static_cast<const std::byte*>(mapping), result.size_, name);
  return result;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      registry_slot_(std::exchange(other.registry_slot_, -1)),
      header_(std::move(other.header_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    mapping_ = std::exchange(other.mapping_, nullptr);
    size_ = std::exchange(other.size_, 0);
    registry_slot_ = std::exchange(other.registry_slot_, -1);
    header_ = std::move(other.header_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

void SafetensorsFile::unmap() noexcept {
  unregister_range(registry_slot_);
  registry_slot_ = -1;
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
  mapping_ = nullptr;
}

}  // namespace mi::io
