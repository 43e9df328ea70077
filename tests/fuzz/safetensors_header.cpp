// libFuzzer target: the safetensors header parser must reject any input with mi::Error, never crash, hang or read
// outside the buffer (run under ASan/UBSan). Corpus: tests/data/fuzz/safetensors_header/ (replayed by test_io).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exactly-sized heap buffer so ASan flags any read past the end of the "file".
  std::vector<std::byte> file(size);
  if (size > 0) std::memcpy(file.data(), data, size);
  try {
    std::vector<mi::io::TensorView> tensors = mi::io::parse_safetensors_header(file.data(), file.size(), "fuzz");
    // Touch every tensor's first and last byte: the parser promised they lie inside the buffer.
    volatile std::byte sink{};
    for (const mi::io::TensorView& view : tensors) {
      if (view.nbytes > 0) {
        sink = view.data[0];
        sink = view.data[view.nbytes - 1];
      }
      (void)view.numel();
    }
    (void)sink;
  } catch (const mi::Error&) {
    // rejected input: fine
  }
  return 0;
}
