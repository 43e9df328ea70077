// Reading Hugging Face checkpoints stored as safetensors, memory-mapped and zero-copy.
//
// Format (https://huggingface.co/docs/safetensors, "Format" section):
//   bytes [0, 8)        N, the header length, unsigned 64-bit little-endian
//   bytes [8, 8+N)      UTF-8 JSON object {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}
//                       (may end with spaces: the reference writer pads it so the data starts 8-byte aligned)
//   bytes [8+N, end)    the byte buffer; data_offsets are relative to its start. The buffer must be entirely
//                       indexed by the tensors, without holes or overlaps (that rules out polyglot files).
// Every number in a header is checked before it is used; a bad file is an mi::Error naming the file and the
// tensor, never an out-of-bounds read.
//
// A checkpoint directory holds either model.safetensors or model.safetensors.index.json ({"weight_map":
// {tensor: shard file}}) plus the shards it names; WeightStore opens either layout.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace mi::io {

// The element types metainfer loads. Other safetensors dtypes (F64, I8, F8_E4M3, ...) are recognised and rejected
// with an "unsupported dtype" error.
enum class DType { BF16, F16, F32 };
const char* dtype_name(DType);  // the safetensors spelling: "BF16", "F16", "F32"
std::size_t dtype_size(DType);  // bytes per element

// A tensor inside a memory-mapped file; never owns memory. Valid while the SafetensorsFile / WeightStore that
// produced it lives (or, for parse_safetensors_header, while the caller's buffer lives).
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // row-major ("C" order), little-endian elements
  const std::byte* data = nullptr;
  std::size_t nbytes = 0;
  std::string file;  // path (or source name) it lives in, for error messages

  int64_t numel() const;

  // Typed pointer to the elements. T must have the dtype's size (e.g. mi::bf16_t or uint16_t for BF16, float for
  // F32) and the data must be aligned for T; otherwise mi::Error. The caller checks the dtype itself.
  template <class T>
  const T* as() const {
    if (sizeof(T) != dtype_size(dtype))
      fail(file, ": tensor '", name, "': read as a ", sizeof(T), "-byte type but its dtype ", dtype_name(dtype),
           " has ", dtype_size(dtype), "-byte elements");
    if (reinterpret_cast<std::uintptr_t>(data) % alignof(T) != 0)
      fail(file, ": tensor '", name, "': data is not ", alignof(T),
           "-byte aligned in the file (header not padded to 8 bytes?)");
    return reinterpret_cast<const T*>(data);
  }
};

// A parsed and validated header: the tensors sorted by name (data pointers into the caller's buffer) and the
// "__metadata__" strings.
struct SafetensorsHeader {
  std::vector<TensorView> tensors;
  std::map<std::string, std::string> metadata;
  std::size_t data_start = 0;  // 8 + N: where the byte buffer begins in the file
};

// Pure parser, for fuzzing and tests: validates everything, no I/O. `file_data`/`file_size` = the whole file;
// `source` names it in errors.
SafetensorsHeader parse_safetensors(const std::byte* file_data, std::size_t file_size, const std::string& source);
// Same, tensors only.
std::vector<TensorView> parse_safetensors_header(const std::byte* file_data, std::size_t file_size,
                                                 const std::string& source);

// One memory-mapped safetensors file (read-only MAP_PRIVATE). Move-only; unmaps in the destructor.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& file);
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::filesystem::path& path() const { return path_; }
  const std::vector<TensorView>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  std::size_t file_size() const { return size_; }

 private:
  SafetensorsFile() = default;
  void unmap() noexcept;

  std::filesystem::path path_;
  void* mapping_ = nullptr;  // the mmap'd whole file (nullptr when moved from)
  std::size_t size_ = 0;
  int registry_slot_ = -1;  // its entry in the SIGBUS handler's table of mapped ranges (-1: none)
  SafetensorsHeader header_;
};

// A mapped checkpoint file that changes on disk while it is mapped (truncated, or rewritten by a tool that
// truncates first) makes the next read of a vanished page raise SIGBUS. Every SafetensorsFile registers its mapped
// range; this installs a SIGBUS handler (sigaction, SA_SIGINFO, async-signal-safe) that, for a fault inside a
// registered range, writes one line on stderr
//   "<program>: error: the checkpoint file <file> changed while <reader> was reading it (SIGBUS at a mapped
//    weight); the weights must not be modified while an engine runs"
// and ends the process with kExitMappedFileChanged instead of a signal death. A SIGBUS elsewhere gets the default
// action. `program` and `reader` must outlive the process (string literals). Contents rewritten in place without a
// size change cannot be detected this way: a checkpoint must not be modified while an engine uses it.
inline constexpr int kExitMappedFileChanged = 1;  // a runtime failure (the checkpoint was valid when it was loaded)
void install_mapped_file_sigbus_handler(const char* program, const char* reader = "the engine");

// All weights of a checkpoint directory: model.safetensors, or model.safetensors.index.json plus its shards.
// The sharded layout is checked for consistency: every shard named by the index exists, every tensor is in the
// shard the index names, no tensor is stored twice, no shard holds a tensor the index does not list.
// Move-only (owns the mappings); TensorView pointers stay valid across moves.
class WeightStore {
 public:
  static WeightStore open(const std::filesystem::path& checkpoint_dir);

  const TensorView* find(std::string_view name) const;  // nullptr if absent
  const TensorView& get(std::string_view name) const;   // mi::Error naming the tensor and the dir if absent
  std::vector<std::string> names() const;                // sorted
  std::size_t total_bytes() const;                       // sum of all tensors' nbytes
  std::size_t size() const { return by_name_.size(); }   // number of tensors
  const std::filesystem::path& dir() const { return dir_; }
  std::vector<std::filesystem::path> files() const;      // the safetensors files opened, in load order

 private:
  std::filesystem::path dir_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, TensorView, std::less<>> by_name_;
};

}  // namespace mi::io
