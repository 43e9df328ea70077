#include "synth/synth_model.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "ckb/family_weights.h"
#include "common/bf16.h"
#include "common/error.h"
#include "io/safetensors_writer.h"

namespace mi::synth {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// splitmix64 (Steele, Lea, Flood 2014): a counter-based generator, so any element's value depends only on
// (seed, tensor, index) and chunks can be filled in parallel deterministically.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Standard normal pair from two uniform draws (Box-Muller), computed in double for platform-independent bits.
inline void normal_pair(uint64_t key, uint64_t pair_index, double& z0, double& z1) {
  const uint64_t a = splitmix64(key ^ (2 * pair_index)), b = splitmix64(key ^ (2 * pair_index + 1));
  const double u1 = (double(a >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  const double u2 = double(b >> 11) * 0x1.0p-53;          // [0, 1)
  const double r = std::sqrt(-2.0 * std::log(u1));
  z0 = r * std::cos(2.0 * M_PI * u2);
  z1 = r * std::sin(2.0 * M_PI * u2);
}

// Fills `count` values mean + std * N(0,1) into `out` (bf16 or f32), in parallel over fixed-size chunks.
void fill_normal(void* out, bool bf16, std::size_t count, uint64_t key, double mean, double std_dev, int threads) {
  constexpr std::size_t kChunk = std::size_t(1) << 20;  // even, so pairs never straddle chunks
  const std::size_t chunks = (count + kChunk - 1) / kChunk;
  auto work = [&](std::size_t first_chunk, std::size_t step) {
    for (std::size_t c = first_chunk; c < chunks; c += step) {
      const std::size_t begin = c * kChunk, end = std::min(count, begin + kChunk);
      for (std::size_t i = begin; i < end; i += 2) {
        double z0, z1;
        normal_pair(key, i / 2, z0, z1);
        const float v0 = float(mean + std_dev * z0), v1 = float(mean + std_dev * z1);
        if (bf16) {
          static_cast<bf16_t*>(out)[i] = f32_to_bf16(v0);
          if (i + 1 < end) static_cast<bf16_t*>(out)[i + 1] = f32_to_bf16(v1);
        } else {
          static_cast<float*>(out)[i] = v0;
          if (i + 1 < end) static_cast<float*>(out)[i + 1] = v1;
        }
      }
    }
  };
  const int n = std::max(1, std::min<int>(threads, int(chunks)));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work, std::size_t(t), std::size_t(n));
  work(0, std::size_t(n));
  for (auto& th : pool) th.join();
}

json parse_value(const std::string& json_text) { return json::parse(json_text); }

void write_json(const fs::path& file, const json& j) {
  std::ofstream out(file, std::ios::binary);
  if (!out) fail(file.string(), ": cannot write");
  out << j.dump(2) << "\n";
  out.close();  // a full disk shows only when the buffer is flushed
  if (!out) fail(file.string(), ": write failed (disk full?)");
}

// Sets cfg[a][b]... for a dotted key "a.b" (the families constrain nested fields such as rope_parameters.rope_type).
void set_dotted(json& cfg, const std::string& key, const json& value) {
  json* node = &cfg;
  std::size_t start = 0;
  for (std::size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1) {
    node = &(*node)[key.substr(start, dot - start)];
    if (!node->is_object()) *node = json::object();
  }
  (*node)[key.substr(start)] = value;
}

json build_config(const ckb::Family& family, const std::map<std::string, std::string>& preset,
                  const std::string& dtype) {
  json cfg;
  cfg["architectures"] = {family.architectures.front()};  // the family's primary architecture (a wrapper's is another layout)
  cfg["model_type"] = family.model_types.empty() ? family.id : family.model_types.front();
  for (const auto& [key, value] : preset)
    if (key.rfind("rope_scaling_", 0) != 0) set_dotted(cfg, key, parse_value(value));
  for (const auto& [key, value] : family.preset_defaults)
    if (key.rfind("rope_scaling", 0) != 0 && key != "tokenizer") set_dotted(cfg, key, parse_value(value));
  // Llama 3.1+ rope scaling: defaults from the family, factor from the preset.
  if (preset.count("rope_scaling_factor") && family.preset_defaults.count("rope_scaling_type")) {
    const auto& d = family.preset_defaults;
    cfg["rope_scaling"] = {{"rope_type", parse_value(d.at("rope_scaling_type"))},
                           {"factor", parse_value(preset.at("rope_scaling_factor"))},
                           {"low_freq_factor", parse_value(d.at("rope_scaling_low_freq_factor"))},
                           {"high_freq_factor", parse_value(d.at("rope_scaling_high_freq_factor"))},
                           {"original_max_position_embeddings",
                            parse_value(d.at("rope_scaling_original_max_position_embeddings"))}};
  } else {
    cfg["rope_scaling"] = nullptr;
  }
  // Keys the family's [config] constrains get a covered value (the first allowed one, unless the preset set it).
  for (const auto& [key, allowed] : family.config_allowed) {
    if (key == "rope_scaling_types" || allowed.empty() || preset.count(key)) continue;
    if (key == "layer_types") {
      // A hybrid's pattern: every full_attention_interval-th layer is full attention (Qwen3.5 / Qwen3-Next), the
      // others the family's first layer type; without an interval, every layer is the first allowed type.
      const int interval = cfg.value("full_attention_interval", 0);
      cfg[key] = json::array();
      for (int l = 0; l < cfg["num_hidden_layers"].get<int>(); ++l)
        cfg[key].push_back(interval > 0 && (l + 1) % interval == 0 ? json("full_attention") : parse_value(allowed.front()));
      continue;
    }
    set_dotted(cfg, key, parse_value(allowed.front()));
  }
  cfg["torch_dtype"] = dtype == "bf16" ? "bfloat16" : "float32";
  cfg["initializer_range"] = 0.02;
  cfg["use_cache"] = true;
  return cfg;
}

}  // namespace

SynthResult synth_model(const ckb::Ckb& ckb, const SynthOptions& o) {
  const ckb::Family* family = ckb.find_family(o.family);
  if (!family) {
    std::string known;
    for (const auto& f : ckb.families)
      if (!f.presets.empty()) known += (known.empty() ? "" : ", ") + f.id;
    fail("--family: unknown family \"", o.family, "\" (known: ", known, ")");
  }
  auto preset_it = family->presets.find(o.preset);
  if (preset_it == family->presets.end()) {
    std::string known;
    for (const auto& [name, values] : family->presets) known += (known.empty() ? "" : ", ") + name;
    fail("--preset: family ", family->id, " has no preset \"", o.preset, "\" (its presets: ", known, ")");
  }
  if (o.dtype != "bf16" && o.dtype != "f32") fail("--dtype: expected bf16 or f32, got \"", o.dtype, "\"");
  if (o.out.empty()) fail("-o: an output directory is required");
  if (fs::exists(o.out) && !fs::is_directory(o.out)) fail(o.out.string(), ": exists and is not a directory");
  if (fs::exists(o.out) && !fs::is_empty(o.out) && !o.force)
    fail(o.out.string(), ": directory is not empty; refusing to overwrite (pass --force to write into it)");

  const json cfg = build_config(*family, preset_it->second, o.dtype);
  const bool tied = cfg.value("tie_word_embeddings", false);
  const auto expected = ckb::expected_weights(*family, cfg, tied);

  fs::path tokenizer_src;
  if (o.with_tokenizer) {
    auto tok = family->preset_defaults.find("tokenizer");
    if (tok != family->preset_defaults.end()) {
      tokenizer_src = o.tokenizer_cache / parse_value(tok->second).get<std::string>();
      if (!fs::exists(tokenizer_src / "tokenizer.json"))
        fail(tokenizer_src.string(), "/tokenizer.json: not found; run ./setup.sh to fetch the tokenizer files, or pass "
             "--no-tokenizer for a token-id-only checkpoint");
    }
  }

  fs::create_directories(o.out);
  const bool bf16 = o.dtype == "bf16";
  const io::DType dtype = bf16 ? io::DType::BF16 : io::DType::F32;
  const std::size_t elem = bf16 ? 2 : 4;
  const int threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());

  // Plan shards (in declaration order, a new shard when the next tensor would overflow), then generate and write
  // one shard at a time so memory stays at one shard even for the 8B presets.
  std::vector<std::vector<std::size_t>> shards(1);
  std::size_t shard_bytes = 0, total_bytes = 0, parameters = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    std::size_t numel = 1;
    for (auto d : expected[i].shape) numel *= std::size_t(d);
    const std::size_t bytes = numel * elem;
    if (!shards.back().empty() && shard_bytes + bytes > o.max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(i);
    shard_bytes += bytes;
    total_bytes += bytes;
    parameters += numel;
  }
  const int n_shards = int(shards.size());
  auto shard_name = [&](int s) {
    if (n_shards == 1) return std::string("model.safetensors");
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
    return std::string(buf);
  };
  json weight_map = json::object();
  for (int s = 0; s < n_shards; ++s) {
    std::vector<std::vector<unsigned char>> buffers;
    std::vector<io::TensorToWrite> tensors;
    buffers.reserve(shards[s].size());
    for (std::size_t idx : shards[s]) {
      const auto& e = expected[idx];
      std::size_t numel = 1;
      for (auto d : e.shape) numel *= std::size_t(d);
      buffers.emplace_back(numel * elem);
      // HF-style init: matrices N(0, 0.02); 1-D (norm) weights 1 + N(0, 0.02) so norms are not all identical.
      const bool vector = e.shape.size() == 1;
      fill_normal(buffers.back().data(), bf16, numel, splitmix64(o.seed) ^ fnv1a(e.name), vector ? 1.0 : 0.0, 0.02,
                  threads);
      tensors.push_back({e.name, dtype, e.shape, buffers.back().data(), buffers.back().size()});
      weight_map[e.name] = shard_name(s);
    }
    io::write_safetensors(o.out / shard_name(s), tensors, {{"format", "pt"}});
  }
  if (n_shards > 1) write_json(o.out / "model.safetensors.index.json", {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}});

  write_json(o.out / "config.json", cfg);
  json gen = {{"do_sample", false}};
  if (cfg.contains("bos_token_id")) gen["bos_token_id"] = cfg["bos_token_id"];
  if (cfg.contains("eos_token_id")) gen["eos_token_id"] = cfg["eos_token_id"];
  write_json(o.out / "generation_config.json", gen);

  SynthResult result{parameters, total_bytes, n_shards, false};
  if (!tokenizer_src.empty()) {
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      if (fs::exists(tokenizer_src / f)) fs::copy_file(tokenizer_src / f, o.out / f, fs::copy_options::overwrite_existing);
    result.tokenizer = true;
  }
  return result;
}

}  // namespace mi::synth
