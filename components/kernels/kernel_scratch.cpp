#include "kernels/kernel_scratch.h"

#include <cstdint>
#include <vector>

namespace mi::kernels {

void* thread_scratch(std::size_t bytes) {
  constexpr std::size_t kAlign = 64;
  thread_local std::vector<unsigned char> buffer;
  if (buffer.size() < bytes + kAlign) buffer.resize(bytes + kAlign);
  const auto address = reinterpret_cast<std::uintptr_t>(buffer.data());
  return buffer.data() + (kAlign - address % kAlign) % kAlign;
}

}  // namespace mi::kernels
