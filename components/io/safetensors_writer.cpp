#include "io/safetensors_writer.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace mi::io {

namespace {

uint64_t checked_bytes(const TensorToWrite& tensor, const std::string& file) {
  uint64_t total = dtype_size(tensor.dtype);
  bool empty = false;
  for (int64_t dim : tensor.shape) {
    if (dim < 0) fail(file, ": tensor '", tensor.name, "': negative dimension ", dim);
    if (dim == 0) empty = true;
  }
  if (empty) return 0;
  for (int64_t dim : tensor.shape) {
    if (total > std::numeric_limits<uint64_t>::max() / uint64_t(dim))
      fail(file, ": tensor '", tensor.name, "': shape too large");
    total *= uint64_t(dim);
  }
  return total;
}

void write_all(std::ofstream& out, const void* data, std::size_t size, const std::string& file) {
  if (size == 0) return;
  out.write(static_cast<const char*>(data), std::streamsize(size));
  if (!out) fail(file, ": write failed");
}

std::string shard_name(std::size_t index, std::size_t count) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "model-%05zu-of-%05zu.safetensors", index, count);
  return buffer;
}

}  // namespace

void write_safetensors(const std::filesystem::path& file, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string file_name = file.string();
  std::set<std::string> seen;
  for (const TensorToWrite& tensor : tensors) {
    if (tensor.name == "__metadata__") fail(file_name, ": '__metadata__' is reserved and cannot name a tensor");
    if (!seen.insert(tensor.name).second) fail(file_name, ": tensor '", tensor.name, "' given twice");
    uint64_t needed = checked_bytes(tensor, file_name);
    if (needed != tensor.nbytes)
      fail(file_name, ": tensor '", tensor.name, "': ", tensor.nbytes, " bytes given but its shape and dtype ",
           dtype_name(tensor.dtype), " need ", needed);
    if (tensor.nbytes > 0 && tensor.data == nullptr) fail(file_name, ": tensor '", tensor.name, "': no data");
  }

  // Larger elements first keeps every tensor aligned to its element size (the buffer starts 8-byte aligned).
  std::vector<const TensorToWrite*> order;
  for (const TensorToWrite& tensor : tensors) order.push_back(&tensor);
  std::sort(order.begin(), order.end(), [](const TensorToWrite* a, const TensorToWrite* b) {
    if (dtype_size(a->dtype) != dtype_size(b->dtype)) return dtype_size(a->dtype) > dtype_size(b->dtype);
    return a->name < b->name;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorToWrite* tensor : order) {
    header[tensor->name] = {{"dtype", dtype_name(tensor->dtype)},
                            {"shape", tensor->shape},
                            {"data_offsets", {offset, offset + tensor->nbytes}}};
    offset += tensor->nbytes;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) fail(file_name, ": cannot open for writing");
  unsigned char length_bytes[8];
  uint64_t length = header_text.size();
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<unsigned char>(length >> (8 * i));  // little-endian
  write_all(out, length_bytes, 8, file_name);
  write_all(out, header_text.data(), header_text.size(), file_name);
  for (const TensorToWrite* tensor : order) write_all(out, tensor->data, tensor->nbytes, file_name);
  out.close();
  if (!out) fail(file_name, ": write failed");
}

void write_checkpoint_weights(const std::filesystem::path& dir, const std::vector<TensorToWrite>& tensors,
                              std::size_t max_shard_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(dir.string(), ": cannot create directory: ", ec.message());
  if (max_shard_bytes == 0) fail(dir.string(), ": max_shard_bytes must be positive");

  // Greedy split in the given order.
  std::vector<std::vector<TensorToWrite>> shards(1);
  std::size_t current_bytes = 0, total_bytes = 0;
  for (const TensorToWrite& tensor : tensors) {
    if (!shards.back().empty() && current_bytes + tensor.nbytes > max_shard_bytes) {
      shards.emplace_back();
      current_bytes = 0;
    }
    shards.back().push_back(tensor);
    current_bytes += tensor.nbytes;
    total_bytes += tensor.nbytes;
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  if (shards.size() == 1) {
    write_safetensors(dir / "model.safetensors", tensors, metadata);
    return;
  }

  std::set<std::string> seen;  // a duplicate across shards would otherwise go unnoticed by write_safetensors
  for (const TensorToWrite& tensor : tensors) {
    if (!seen.insert(tensor.name).second) fail(dir.string(), ": tensor '", tensor.name, "' given twice");
  }
  nlohmann::json weight_map = nlohmann::json::object();  // sorted by tensor name, as Hugging Face writes it
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shard_name(i + 1, shards.size());
    write_safetensors(dir / name, shards[i], metadata);
    for (const TensorToWrite& tensor : shards[i]) weight_map[tensor.name] = name;
  }
  nlohmann::ordered_json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
  const std::filesystem::path index_path = dir / "model.safetensors.index.json";
  std::ofstream out(index_path, std::ios::binary | std::ios::trunc);
  if (!out) fail(index_path.string(), ": cannot open for writing");
  out << index.dump(2) << "\n";
  out.close();
  if (!out) fail(index_path.string(), ": write failed");
}

}  // namespace mi::io
