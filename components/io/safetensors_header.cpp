// The safetensors header parser: a hostile-input validator. No I/O; every number is checked before use.
// Spec: https://huggingface.co/docs/safetensors ("Format"): 8-byte LE header length N, N bytes of JSON starting
// with '{' (trailing spaces allowed), then the byte buffer, which the tensors must index entirely (no holes, no
// overlaps); duplicate keys are not allowed; "__metadata__" is a string-to-string map.
#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"

namespace mi::io {

namespace {

// The reference implementation refuses headers above 100 MB; real ones are at most a few MB.
constexpr std::size_t kMaxHeaderBytes = std::size_t(100) << 20;
// Deep nesting only appears in malicious headers (a valid one is 3 levels deep); refuse it early.
constexpr int kMaxJsonDepth = 16;

struct KnownDType {
  const char* name;
  bool supported;
  DType dtype;
};
// Every dtype the safetensors format defines, so that a real-but-unsupported one (F64, I8, F8_E4M3, ...) gets a
// different message from a misspelt one.
constexpr KnownDType kKnownDTypes[] = {
    {"BF16", true, DType::BF16},     {"F16", true, DType::F16},       {"F32", true, DType::F32},
    {"F64", false, DType::F32},      {"BOOL", false, DType::F32},     {"U8", false, DType::F32},
    {"I8", false, DType::F32},       {"I16", false, DType::F32},      {"U16", false, DType::F32},
    {"I32", false, DType::F32},      {"U32", false, DType::F32},      {"I64", false, DType::F32},
    {"U64", false, DType::F32},      {"F8_E5M2", false, DType::F32},  {"F8_E4M3", false, DType::F32},
    {"F8_E8M0", false, DType::F32},  {"F6_E2M3", false, DType::F32},  {"F6_E3M2", false, DType::F32},
    {"F4", false, DType::F32},       {"C64", false, DType::F32},
};

// A short rendering of a JSON value for error messages.
std::string show(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

std::string show_shape(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// A JSON integer in [0, limit], or nullopt (negative, fractional, too large, not a number).
bool as_bounded_unsigned(const nlohmann::json& value, uint64_t limit, uint64_t& out) {
  if (value.is_number_unsigned()) {
    out = value.get<uint64_t>();
  } else if (value.is_number_integer()) {
    int64_t v = value.get<int64_t>();
    if (v < 0) return false;
    out = uint64_t(v);
  } else {
    return false;
  }
  return out <= limit;
}

// Parses the header JSON, refusing duplicate keys (nlohmann would silently keep the last one, which lets two
// readers disagree on a file) and deep nesting.
nlohmann::json parse_header_json(const char* text, std::size_t length, const std::string& source) {
  std::vector<std::set<std::string>> keys_per_open_object;
  auto check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) -> bool {
    using E = nlohmann::json::parse_event_t;
    if ((event == E::object_start || event == E::array_start) && depth >= kMaxJsonDepth)
      fail(source, ": header JSON is nested deeper than ", kMaxJsonDepth, " levels");
    if (event == E::object_start) keys_per_open_object.emplace_back();
    if (event == E::object_end && !keys_per_open_object.empty()) keys_per_open_object.pop_back();
    if (event == E::key && !keys_per_open_object.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys_per_open_object.back().insert(key).second)
        fail(source, ": header has the key '", key, "' twice (duplicate keys are not allowed)");
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, text + length, check);
  } catch (const nlohmann::json::exception& e) {
    fail(source, ": header is not valid JSON: ", e.what());
  }
}

DType parse_dtype(const nlohmann::json& entry, const std::string& name, const std::string& source) {
  auto it = entry.find("dtype");
  if (it == entry.end()) fail(source, ": tensor '", name, "': missing field 'dtype'");
  if (!it->is_string()) fail(source, ": tensor '", name, "': field 'dtype': expected a string, got ", show(*it));
  const std::string& text = it->get_ref<const std::string&>();
  for (const KnownDType& known : kKnownDTypes) {
    if (text != known.name) continue;
    if (!known.supported)
      fail(source, ": tensor '", name, "': unsupported dtype '", text, "' (metainfer loads BF16, F16, F32)");
    return known.dtype;
  }
  fail(source, ": tensor '", name, "': unknown dtype '", text, "' (not a safetensors dtype)");
}

std::vector<int64_t> parse_shape(const nlohmann::json& entry, const std::string& name, const std::string& source) {
  auto it = entry.find("shape");
  if (it == entry.end()) fail(source, ": tensor '", name, "': missing field 'shape'");
  if (!it->is_array())
    fail(source, ": tensor '", name, "': field 'shape': expected an array of non-negative integers, got ", show(*it));
  std::vector<int64_t> shape;
  for (const nlohmann::json& dim : *it) {
    uint64_t value = 0;
    if (!as_bounded_unsigned(dim, uint64_t(std::numeric_limits<int64_t>::max()), value))
      fail(source, ": tensor '", name, "': field 'shape': expected an array of non-negative integers, got ",
           show(*it));
    shape.push_back(int64_t(value));
  }
  return shape;
}

// Bytes the shape needs, or fails when the product overflows.
uint64_t bytes_needed(const std::vector<int64_t>& shape, DType dtype, const std::string& name,
                      const std::string& source) {
  uint64_t total = dtype_size(dtype);
  for (int64_t dim : shape) {
    if (dim == 0) return 0;
  }
  for (int64_t dim : shape) {
    if (total > std::numeric_limits<uint64_t>::max() / uint64_t(dim))
      fail(source, ": tensor '", name, "': shape ", show_shape(shape), " is too large (byte size overflows)");
    total *= uint64_t(dim);
  }
  return total;
}

}  // namespace

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::F32: return "F32";
  }
  return "?";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::F32: return 4;
  }
  return 0;
}

int64_t TensorView::numel() const {
  for (int64_t dim : shape) {
    if (dim == 0) return 0;  // checked first: [huge, huge, 0] is a valid empty tensor whose prefix would overflow
  }
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;  // cannot overflow: the parser checked numel * dtype_size fits the file
  return n;
}

SafetensorsHeader parse_safetensors(const std::byte* file_data, std::size_t file_size, const std::string& source) {
  if (file_size < 8)
    fail(source, ": file is ", file_size, " bytes, too short for the 8-byte safetensors header length (truncated?)");
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | uint64_t(file_data[i]);  // little-endian
  if (header_length > file_size - 8)
    fail(source, ": header length ", header_length, " exceeds the ", file_size - 8,
         " bytes after the length field (truncated file or not a safetensors file)");
  if (header_length > kMaxHeaderBytes)
    fail(source, ": header length ", header_length, " exceeds the 100 MB limit");
  if (header_length == 0) fail(source, ": header length is 0 (the header must be a JSON object)");
  const char* header_text = reinterpret_cast<const char*>(file_data + 8);
  if (header_text[0] != '{') fail(source, ": header does not start with '{' (not a safetensors file?)");

  nlohmann::json header = parse_header_json(header_text, header_length, source);
  if (!header.is_object()) fail(source, ": header is not a JSON object");

  SafetensorsHeader result;
  result.data_start = 8 + header_length;
  const std::byte* data = file_data + result.data_start;
  const uint64_t data_size = file_size - result.data_start;

  struct Range {
    uint64_t begin, end;
    std::size_t index;
  };
  std::vector<Range> ranges;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        fail(source, ": '__metadata__': expected an object of strings, got ", show(entry));
      for (auto& [key, value] : entry.items()) {
        if (!value.is_string())
          fail(source, ": '__metadata__': key '", key, "': expected a string, got ", show(value));
        result.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object())
      fail(source, ": tensor '", name, "': expected an object with dtype, shape, data_offsets, got ", show(entry));
    TensorView view;
    view.name = name;
    view.file = source;
    view.dtype = parse_dtype(entry, name, source);
    view.shape = parse_shape(entry, name, source);

    auto offsets = entry.find("data_offsets");
    if (offsets == entry.end()) fail(source, ": tensor '", name, "': missing field 'data_offsets'");
    uint64_t begin = 0, end = 0;
    if (!offsets->is_array() || offsets->size() != 2 ||
        !as_bounded_unsigned((*offsets)[0], std::numeric_limits<uint64_t>::max(), begin) ||
        !as_bounded_unsigned((*offsets)[1], std::numeric_limits<uint64_t>::max(), end))
      fail(source, ": tensor '", name, "': field 'data_offsets': expected [begin, end] (non-negative integers), got ",
           show(*offsets));
    if (begin > end)
      fail(source, ": tensor '", name, "': data_offsets [", begin, ", ", end, "] has begin > end");
    if (end > data_size)
      fail(source, ": tensor '", name, "': data_offsets [", begin, ", ", end, "] run past the end of the data buffer (",
           data_size, " bytes; truncated file?)");
    uint64_t needed = bytes_needed(view.shape, view.dtype, name, source);
    if (end - begin != needed)
      fail(source, ": tensor '", name, "': data_offsets [", begin, ", ", end, "] span ", end - begin,
           " bytes but shape ", show_shape(view.shape), " of ", dtype_name(view.dtype), " needs ", needed, " bytes");
    view.data = data + begin;
    view.nbytes = std::size_t(needed);
    ranges.push_back({begin, end, result.tensors.size()});
    result.tensors.push_back(std::move(view));
  }

  // The tensors must tile the byte buffer exactly: sorted by begin, each starts where the previous one ended.
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t covered_to = 0;
  const std::string* previous = nullptr;
  for (const Range& range : ranges) {
    const std::string& name = result.tensors[range.index].name;
    if (range.begin < covered_to)
      fail(source, ": tensors '", *previous, "' and '", name, "' overlap (", name, " starts at byte ", range.begin,
           ", before byte ", covered_to, ")");
    if (range.begin > covered_to)
      fail(source, ": bytes [", covered_to, ", ", range.begin, ") of the data buffer belong to no tensor (hole before '",
           name, "')");
    covered_to = range.end;
    previous = &name;
  }
  if (covered_to != data_size)
    fail(source, ": the data buffer has ", data_size, " bytes but the tensors cover only ", covered_to,
         " (trailing bytes after the last tensor)");
  return result;
}

std::vector<TensorView> parse_safetensors_header(const std::byte* file_data, std::size_t file_size,
                                                 const std::string& source) {
  return parse_safetensors(file_data, file_size, source).tensors;
}

}  // namespace mi::io
