// WeightStore: the weights of a checkpoint directory, in either Hugging Face layout:
//   model.safetensors                                       (one file)
//   model.safetensors.index.json + the shards it names      ({"metadata": {...}, "weight_map": {tensor: file}})
// When both are present, model.safetensors wins (as transformers' loader prefers the single file).
#include <set>

#include "common/json_file.h"
#include "io/safetensors.h"

namespace mi::io {

namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// A shard must be a plain file name inside the checkpoint directory: an index must not reach other files.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

}  // namespace

WeightStore WeightStore::open(const std::filesystem::path& checkpoint_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(checkpoint_dir, ec))
    fail(checkpoint_dir.string(), ": not a directory (expected a checkpoint directory holding ", kSingleFile, " or ",
         kIndexFile, ")");

  WeightStore store;
  store.dir_ = checkpoint_dir;
  const fs::path single = checkpoint_dir / kSingleFile;
  const fs::path index_path = checkpoint_dir / kIndexFile;

  if (fs::exists(single, ec)) {
    store.files_.push_back(SafetensorsFile::open(single));
    for (const TensorView& view : store.files_.back().tensors()) store.by_name_.emplace(view.name, view);
    return store;
  }
  if (!fs::exists(index_path, ec))
    fail(checkpoint_dir.string(), ": no weights found (neither ", kSingleFile, " nor ", kIndexFile, ")");

  const std::string index_name = index_path.string();
  nlohmann::json index = read_json_file(index_path);
  if (!index.is_object()) fail(index_name, ": expected a JSON object");
  auto weight_map_it = index.find("weight_map");
  if (weight_map_it == index.end()) fail(index_name, ": missing field 'weight_map'");
  if (!weight_map_it->is_object())
    fail(index_name, ": field 'weight_map': expected an object {tensor: shard file}, got ", weight_map_it->type_name());

  // shard file -> the tensors the index places in it
  std::map<std::string, std::string> shard_of_tensor;
  std::map<std::string, std::vector<std::string>> tensors_of_shard;
  for (auto& [tensor, shard_value] : weight_map_it->items()) {
    if (!shard_value.is_string())
      fail(index_name, ": weight_map['", tensor, "']: expected a shard file name, got ", shard_value.dump());
    const std::string& shard = shard_value.get_ref<const std::string&>();
    if (!is_plain_file_name(shard))
      fail(index_name, ": weight_map['", tensor, "']: shard '", shard,
           "' is not a plain file name in the checkpoint directory");
    shard_of_tensor[tensor] = shard;
    tensors_of_shard[shard].push_back(tensor);
  }
  if (tensors_of_shard.empty()) fail(index_name, ": 'weight_map' is empty");

  // Check every shard exists before mapping any, so the error names the first missing one and who needs it.
  for (const auto& [shard, tensors] : tensors_of_shard) {
    if (!fs::is_regular_file(checkpoint_dir / shard, ec))
      fail(index_name, ": shard '", shard, "' (holding tensor '", tensors.front(), "' and ", tensors.size() - 1,
           " more) does not exist in ", checkpoint_dir.string());
  }

  for (const auto& [shard, tensors] : tensors_of_shard) {
    store.files_.push_back(SafetensorsFile::open(checkpoint_dir / shard));
    for (const TensorView& view : store.files_.back().tensors()) {
      auto [existing, inserted] = store.by_name_.emplace(view.name, view);
      if (!inserted)
        fail(checkpoint_dir.string(), ": tensor '", view.name, "' is stored twice: in ", existing->second.file,
             " and in ", view.file);
    }
  }
  // The index and the shards must agree both ways.
  for (const auto& [name, view] : store.by_name_) {
    auto listed = shard_of_tensor.find(name);
    if (listed == shard_of_tensor.end())
      fail(view.file, ": tensor '", name, "' is not listed in ", index_name, " (index and shards disagree)");
    if (checkpoint_dir / listed->second != std::filesystem::path(view.file))
      fail(view.file, ": tensor '", name, "' is stored here but ", index_name, " places it in '", listed->second, "'");
  }
  for (const auto& [tensor, shard] : shard_of_tensor) {
    if (!store.by_name_.count(tensor))
      fail(index_name, ": tensor '", tensor, "' is placed in shard '", shard, "' but that shard does not contain it");
  }
  return store;
}

const TensorView* WeightStore::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

const TensorView& WeightStore::get(std::string_view name) const {
  const TensorView* view = find(name);
  if (view == nullptr) fail(dir_.string(), ": the checkpoint has no tensor '", name, "'");
  return *view;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> result;
  result.reserve(by_name_.size());
  for (const auto& [name, view] : by_name_) result.push_back(name);
  return result;
}

std::size_t WeightStore::total_bytes() const {
  std::size_t total = 0;
  for (const auto& [name, view] : by_name_) total += view.nbytes;
  return total;
}

std::vector<std::filesystem::path> WeightStore::files() const {
  std::vector<std::filesystem::path> result;
  for (const SafetensorsFile& file : files_) result.push_back(file.path());
  return result;
}

}  // namespace mi::io
