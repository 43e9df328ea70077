// Helpers of the oracle tests: the golden cases, copies of a golden checkpoint with edited weights or config.
// (Tests may use components; the oracle itself may not.)
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../toolkit_support.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"

namespace oracle_test {

namespace fs = std::filesystem;
using nlohmann::json;

inline json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

inline void write_json(const fs::path& p, const json& j) { std::ofstream(p) << j.dump(2); }

// Every golden case whose trace names an architecture the oracle implements.
inline std::vector<std::string> supported_golden_cases() {
  std::vector<std::string> cases;
  for (const auto& entry : fs::directory_iterator(fs::path(METAINFER_TEST_DATA) / "golden")) {
    const fs::path trace = entry.path() / "trace.json";
    if (!fs::exists(trace)) continue;
    const json t = read_json(trace);
    const std::string arch = t.at("architectures").at(0).get<std::string>();
    if (arch == "Qwen3ForCausalLM" || arch == "LlamaForCausalLM" || arch == "Qwen3_5ForCausalLM" ||
        arch == "Qwen3NextForCausalLM")
      cases.push_back(entry.path().filename().string());
  }
  std::sort(cases.begin(), cases.end());
  return cases;
}

// A tensor held in memory, for writing edited checkpoints.
struct OwnedTensor {
  std::string name;
  mi::io::DType dtype;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
};

inline std::vector<OwnedTensor> read_tensors(const fs::path& dir) {
  const mi::io::WeightStore store = mi::io::WeightStore::open(dir);
  std::vector<OwnedTensor> out;
  for (const std::string& name : store.names()) {
    const mi::io::TensorView& v = store.get(name);
    const auto* p = reinterpret_cast<const unsigned char*>(v.data);
    out.push_back({name, v.dtype, v.shape, std::vector<unsigned char>(p, p + v.nbytes)});
  }
  return out;
}

inline void write_tensors(const fs::path& dir, const std::vector<OwnedTensor>& tensors,
                          std::size_t max_shard_bytes = std::size_t(2) << 30) {
  std::vector<mi::io::TensorToWrite> views;
  for (const OwnedTensor& t : tensors) views.push_back({t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size()});
  mi::io::write_checkpoint_weights(dir, views, max_shard_bytes);
}

// BF16 -> F32 (exact).
inline OwnedTensor to_f32(const OwnedTensor& t) {
  if (t.dtype != mi::io::DType::BF16) return t;
  OwnedTensor f{t.name, mi::io::DType::F32, t.shape, std::vector<unsigned char>(t.bytes.size() * 2)};
  for (size_t i = 0; i < t.bytes.size() / 2; ++i) {
    uint16_t b;
    std::memcpy(&b, &t.bytes[2 * i], 2);
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    std::memcpy(&f.bytes[4 * i], &u, 4);
  }
  return f;
}

// BF16 -> F16, round to nearest even (golden weights lie well inside the f16 range; values below 2^-14 become f16
// subnormals and may lose low bits).
inline uint16_t f16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = (u >> 16) & 0x8000;
  const double a = std::fabs(static_cast<double>(f));
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): the f16 exponent is e - 1
  if (e - 1 < -14) return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));  // subnormal, 2^-24 units
  double q = std::nearbyint(std::ldexp(a, 10 - (e - 1)));  // significand in [1024, 2048]
  if (q == 2048) {
    q = 1024;
    ++e;
  }
  return sign | static_cast<uint16_t>(((e - 1 + 15) << 10) | (static_cast<int>(q) - 1024));
}

inline OwnedTensor to_f16(const OwnedTensor& t) {
  if (t.dtype != mi::io::DType::BF16) return t;
  OwnedTensor h{t.name, mi::io::DType::F16, t.shape, std::vector<unsigned char>(t.bytes.size())};
  for (size_t i = 0; i < t.bytes.size() / 2; ++i) {
    uint16_t b;
    std::memcpy(&b, &t.bytes[2 * i], 2);
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    const uint16_t bits = f16_bits(f);
    std::memcpy(&h.bytes[2 * i], &bits, 2);
  }
  return h;
}

// A copy of golden case `name` in `dst`: config.json edited by `edit_config`, weights by `edit_weights`.
inline void copy_case(const std::string& name, const fs::path& dst,
                      const std::function<void(json&)>& edit_config = {},
                      const std::function<void(std::vector<OwnedTensor>&)>& edit_weights = {},
                      std::size_t max_shard_bytes = std::size_t(2) << 30) {
  const fs::path src = mi_test::golden(name);
  fs::create_directories(dst);
  json config = read_json(src / "config.json");
  if (edit_config) edit_config(config);
  write_json(dst / "config.json", config);
  std::vector<OwnedTensor> tensors = read_tensors(src);
  if (edit_weights) edit_weights(tensors);
  write_tensors(dst, tensors, max_shard_bytes);
}

// The message of the std::exception `f` throws ("" if none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace oracle_test
