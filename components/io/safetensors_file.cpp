// One safetensors file, memory-mapped read-only (MAP_PRIVATE) so tensors are zero-copy views of the page cache.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "io/safetensors.h"

namespace mi::io {

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
  // From here on `result` owns the mapping: a parse error unmaps it in the destructor.
  result.header_ = parse_safetensors(static_cast<const std::byte*>(mapping), result.size_, name);
  return result;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      header_(std::move(other.header_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    mapping_ = std::exchange(other.mapping_, nullptr);
    size_ = std::exchange(other.size_, 0);
    header_ = std::move(other.header_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

void SafetensorsFile::unmap() noexcept {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
  mapping_ = nullptr;
}

}  // namespace mi::io
