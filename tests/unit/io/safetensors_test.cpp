// safetensors reader/writer: the vendored golden checkpoints, writer round trips (single file and sharded), and
// corrupt inputs, each with the error it must produce.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "common/bf16.h"
#include "common/json_file.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "io_test_util.h"

namespace mi::io {
namespace {

using test::error_of;
using test::safetensors_image;
using test::ScratchDir;
using Shapes = std::map<std::string, std::vector<int64_t>>;

const std::filesystem::path kGolden = std::filesystem::path(METAINFER_TEST_DATA) / "golden";

// ---- golden checkpoints: names and shapes as tests/data/golden/README.md lists them ------------------------------

struct DenseDims {
  int64_t V, H, L, nH, nKV, D, I;
  bool qk_norm, tied;
};

Shapes dense_shapes(const DenseDims& d) {
  Shapes s;
  s["model.embed_tokens.weight"] = {d.V, d.H};
  if (!d.tied) s["lm_head.weight"] = {d.V, d.H};
  s["model.norm.weight"] = {d.H};
  for (int64_t l = 0; l < d.L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    s[p + "input_layernorm.weight"] = {d.H};
    s[p + "post_attention_layernorm.weight"] = {d.H};
    s[p + "self_attn.q_proj.weight"] = {d.nH * d.D, d.H};
    s[p + "self_attn.k_proj.weight"] = {d.nKV * d.D, d.H};
    s[p + "self_attn.v_proj.weight"] = {d.nKV * d.D, d.H};
    s[p + "self_attn.o_proj.weight"] = {d.H, d.nH * d.D};
    if (d.qk_norm) {
      s[p + "self_attn.q_norm.weight"] = {d.D};
      s[p + "self_attn.k_norm.weight"] = {d.D};
    }
    s[p + "mlp.gate_proj.weight"] = {d.I, d.H};
    s[p + "mlp.up_proj.weight"] = {d.I, d.H};
    s[p + "mlp.down_proj.weight"] = {d.H, d.I};
  }
  return s;
}

// Layers 0-2 Gated DeltaNet, layer 3 gated full attention (README: qwen3_5-tiny / qwen3_next-tiny).
Shapes hybrid_shapes(bool next) {
  Shapes s;
  s["model.embed_tokens.weight"] = {512, 128};
  s["lm_head.weight"] = {512, 128};
  s["model.norm.weight"] = {128};
  for (int l = 0; l < 4; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    s[p + "input_layernorm.weight"] = {128};
    s[p + "post_attention_layernorm.weight"] = {128};
    if (l < 3) {
      const std::string a = p + "linear_attn.";
      if (next) {
        s[a + "in_proj_qkvz.weight"] = {192, 128};
        s[a + "in_proj_ba.weight"] = {8, 128};
      } else {
        s[a + "in_proj_qkv.weight"] = {128, 128};
        s[a + "in_proj_z.weight"] = {64, 128};
        s[a + "in_proj_b.weight"] = {4, 128};
        s[a + "in_proj_a.weight"] = {4, 128};
      }
      s[a + "conv1d.weight"] = {128, 1, 4};
      s[a + "A_log"] = {4};
      s[a + "dt_bias"] = {4};
      s[a + "norm.weight"] = {16};
      s[a + "out_proj.weight"] = {128, 64};
    } else {
      s[p + "self_attn.q_proj.weight"] = {256, 128};
      s[p + "self_attn.k_proj.weight"] = {64, 128};
      s[p + "self_attn.v_proj.weight"] = {64, 128};
      s[p + "self_attn.o_proj.weight"] = {128, 128};
      s[p + "self_attn.q_norm.weight"] = {32};
      s[p + "self_attn.k_norm.weight"] = {32};
    }
    if (next) {
      s[p + "mlp.gate.weight"] = {8, 128};
      for (int e = 0; e < 8; ++e) {
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        s[x + "gate_proj.weight"] = {64, 128};
        s[x + "up_proj.weight"] = {64, 128};
        s[x + "down_proj.weight"] = {128, 64};
      }
      s[p + "mlp.shared_expert.gate_proj.weight"] = {64, 128};
      s[p + "mlp.shared_expert.up_proj.weight"] = {64, 128};
      s[p + "mlp.shared_expert.down_proj.weight"] = {128, 64};
      s[p + "mlp.shared_expert_gate.weight"] = {1, 128};
    } else {
      s[p + "mlp.gate_proj.weight"] = {256, 128};
      s[p + "mlp.up_proj.weight"] = {256, 128};
      s[p + "mlp.down_proj.weight"] = {128, 256};
    }
  }
  return s;
}

std::map<std::string, Shapes> golden_expectations() {
  return {
      {"qwen3-tiny", dense_shapes({512, 128, 3, 4, 2, 32, 256, true, true})},
      {"qwen3-tiny-s1", dense_shapes({512, 128, 3, 4, 2, 32, 256, true, true})},
      {"qwen3-hd128", dense_shapes({512, 256, 2, 4, 1, 128, 384, true, false})},
      {"llama-tiny", dense_shapes({512, 128, 3, 4, 2, 32, 256, false, false})},
      {"qwen3_5-tiny", hybrid_shapes(false)},
      {"qwen3_next-tiny", hybrid_shapes(true)},
  };
}

TEST(GoldenCheckpoints, NamesShapesDtypesMatchTheReadme) {
  for (const auto& [case_name, expected] : golden_expectations()) {
    SCOPED_TRACE(case_name);
    WeightStore store = WeightStore::open(kGolden / case_name);
    Shapes actual;
    std::size_t bytes = 0;
    for (const std::string& name : store.names()) {
      const TensorView& view = store.get(name);
      actual[name] = view.shape;
      EXPECT_EQ(view.dtype, DType::BF16) << name;
      EXPECT_EQ(view.nbytes, std::size_t(view.numel()) * 2) << name;
      bytes += view.nbytes;
    }
    EXPECT_EQ(actual, expected);
    EXPECT_EQ(store.total_bytes(), bytes);
    EXPECT_EQ(store.files().size(), 1u);
  }
}

// The zero-copy views must point at exactly the bytes an ordinary read finds at 8 + N + begin.
TEST(GoldenCheckpoints, ViewsPointAtTheBytesAPlainReadFinds) {
  const std::filesystem::path file = kGolden / "qwen3-tiny" / "model.safetensors";
  const std::string bytes = test::read_bytes(file);
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);  // little-endian host
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_length));
  SafetensorsFile mapped = SafetensorsFile::open(file);
  EXPECT_EQ(mapped.metadata().at("format"), "pt");
  ASSERT_EQ(mapped.tensors().size() + 1, header.size());  // + __metadata__
  for (const TensorView& view : mapped.tensors()) {
    uint64_t begin = header[view.name]["data_offsets"][0];
    ASSERT_EQ(std::memcmp(view.data, bytes.data() + 8 + header_length + begin, view.nbytes), 0) << view.name;
    EXPECT_EQ(view.file, file.string());
  }
  // Moving the file object keeps the mapping (and so the views) where it was.
  const std::byte* before = mapped.tensors().front().data;
  SafetensorsFile moved = std::move(mapped);
  EXPECT_EQ(moved.tensors().front().data, before);
}

// F32 data: the prefill logits' last row is the first greedy step's logits (golden README).
TEST(GoldenCheckpoints, F32LogitsFileReadsConsistently) {
  SafetensorsFile logits = SafetensorsFile::open(kGolden / "qwen3-tiny" / "logits.safetensors");
  const TensorView* prefill = nullptr;
  const TensorView* steps = nullptr;
  for (const TensorView& view : logits.tensors()) {
    if (view.name == "p1.prefill_logits") prefill = &view;
    if (view.name == "p1.logits") steps = &view;
  }
  ASSERT_NE(prefill, nullptr);
  ASSERT_NE(steps, nullptr);
  EXPECT_EQ(prefill->dtype, DType::F32);
  EXPECT_EQ(prefill->shape, (std::vector<int64_t>{10, 512}));
  EXPECT_EQ(steps->shape, (std::vector<int64_t>{32, 512}));
  const float* last_prefill_row = prefill->as<float>() + 9 * 512;
  const float* first_step = steps->as<float>();
  for (int v = 0; v < 512; ++v) EXPECT_NEAR(last_prefill_row[v], first_step[v], 1e-4) << v;
}

// ---- writer round trips -----------------------------------------------------------------------------------------

struct OwnedTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
  TensorToWrite view() const { return {name, dtype, shape, bytes.data(), bytes.size()}; }
};

OwnedTensor make_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, unsigned seed) {
  std::size_t count = 1;
  for (int64_t d : shape) count *= std::size_t(d);
  OwnedTensor t{name, dtype, shape, std::vector<unsigned char>(count * dtype_size(dtype))};
  for (std::size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<unsigned char>((i * 31 + seed * 7) & 0xff);
  return t;
}

std::vector<TensorToWrite> views_of(const std::vector<OwnedTensor>& tensors) {
  std::vector<TensorToWrite> views;
  for (const OwnedTensor& t : tensors) views.push_back(t.view());
  return views;
}

void expect_same_content(const WeightStore& store, const std::vector<OwnedTensor>& tensors) {
  ASSERT_EQ(store.size(), tensors.size());
  for (const OwnedTensor& t : tensors) {
    const TensorView* view = store.find(t.name);
    ASSERT_NE(view, nullptr) << t.name;
    EXPECT_EQ(view->dtype, t.dtype) << t.name;
    EXPECT_EQ(view->shape, t.shape) << t.name;
    ASSERT_EQ(view->nbytes, t.bytes.size()) << t.name;
    EXPECT_EQ(std::memcmp(view->data, t.bytes.data(), t.bytes.size()), 0) << t.name;
  }
}

std::vector<OwnedTensor> mixed_tensors() {
  return {make_tensor("b.bf16", DType::BF16, {3, 5}, 1), make_tensor("a.f32", DType::F32, {7}, 2),
          make_tensor("c.f16", DType::F16, {1, 3, 1}, 3), make_tensor("d.scalar", DType::F32, {}, 4),
          make_tensor("e.empty", DType::BF16, {0, 4}, 5)};
}

TEST(SafetensorsWriter, RoundTripsMixedDtypesWithAlignedDataAndMetadata) {
  ScratchDir dir;
  std::vector<OwnedTensor> tensors = mixed_tensors();
  write_safetensors(dir / "x.safetensors", views_of(tensors), {{"format", "pt"}, {"note", "round trip"}});
  SafetensorsFile file = SafetensorsFile::open(dir / "x.safetensors");
  EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "round trip"}}));
  const std::string bytes = test::read_bytes(dir / "x.safetensors");
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);
  EXPECT_EQ(header_length % 8, 0u) << "header padded to 8 bytes";
  for (const TensorView& view : file.tensors()) {
    if (view.dtype == DType::F32) {
      EXPECT_NO_THROW(view.as<float>()) << view.name;
    } else {
      EXPECT_NO_THROW(view.as<uint16_t>()) << view.name;
    }
  }
  // Deterministic: the same input gives the same bytes.
  write_safetensors(dir / "y.safetensors", views_of(tensors), {{"format", "pt"}, {"note", "round trip"}});
  EXPECT_EQ(bytes, test::read_bytes(dir / "y.safetensors"));

  write_checkpoint_weights(dir / "ckpt", views_of(tensors));
  EXPECT_TRUE(std::filesystem::exists(dir / "ckpt" / "model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "ckpt" / "model.safetensors.index.json"));
  expect_same_content(WeightStore::open(dir / "ckpt"), tensors);
}

TEST(SafetensorsWriter, ShardedRoundTripWritesHuggingFaceIndex) {
  ScratchDir dir;
  std::vector<OwnedTensor> tensors;
  for (int i = 0; i < 5; ++i) tensors.push_back(make_tensor("layer." + std::to_string(i), DType::BF16, {10, 10}, i));
  // 200 bytes each, limit 450: shards of 2, 2, 1 tensors.
  write_checkpoint_weights(dir.path(), views_of(tensors), 450);
  for (const char* shard : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                            "model-00003-of-00003.safetensors"})
    EXPECT_TRUE(std::filesystem::exists(dir / shard)) << shard;
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors"));
  nlohmann::json index = read_json_file(dir / "model.safetensors.index.json");
  EXPECT_EQ(index["metadata"]["total_size"], 1000);
  EXPECT_EQ(index["weight_map"]["layer.0"], "model-00001-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["layer.3"], "model-00002-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["layer.4"], "model-00003-of-00003.safetensors");

  WeightStore store = WeightStore::open(dir.path());
  expect_same_content(store, tensors);
  EXPECT_EQ(store.files().size(), 3u);
  EXPECT_EQ(store.total_bytes(), 1000u);
  EXPECT_EQ(store.names(), (std::vector<std::string>{"layer.0", "layer.1", "layer.2", "layer.3", "layer.4"}));
}

TEST(SafetensorsWriter, RejectsInconsistentInput) {
  ScratchDir dir;
  OwnedTensor t = make_tensor("t", DType::F32, {4}, 0);
  TensorToWrite wrong_size = t.view();
  wrong_size.nbytes = 8;
  EXPECT_NE(error_of([&] { write_safetensors(dir / "a.safetensors", {wrong_size}); }).find("need 16"),
            std::string::npos);
  EXPECT_NE(error_of([&] { write_safetensors(dir / "a.safetensors", {t.view(), t.view()}); }).find("given twice"),
            std::string::npos);
}

// ---- corrupt inputs ---------------------------------------------------------------------------------------------

std::string parse_error(const std::string& image) {
  return error_of([&] {
    parse_safetensors_header(reinterpret_cast<const std::byte*>(image.data()), image.size(), "bad.safetensors");
  });
}

TEST(SafetensorsCorrupt, TruncatedFiles) {
  ScratchDir dir;
  const std::string golden = test::read_bytes(kGolden / "qwen3-tiny" / "model.safetensors");
  test::write_bytes(dir / "cut_data.safetensors", golden.substr(0, golden.size() - 100));
  std::string message = error_of([&] { SafetensorsFile::open(dir / "cut_data.safetensors"); });
  EXPECT_ERROR_HAS(message, (dir / "cut_data.safetensors").string());
  EXPECT_ERROR_HAS(message, "run past the end of the data buffer");
  test::write_bytes(dir / "cut_header.safetensors", golden.substr(0, 100));
  EXPECT_ERROR_HAS(error_of([&] { SafetensorsFile::open(dir / "cut_header.safetensors"); }), "exceeds the 92 bytes");
  test::write_bytes(dir / "tiny.safetensors", golden.substr(0, 5));
  EXPECT_ERROR_HAS(error_of([&] { SafetensorsFile::open(dir / "tiny.safetensors"); }), "too short");
  EXPECT_ERROR_HAS(parse_error(""), "0 bytes, too short");
}

TEST(SafetensorsCorrupt, HeaderLengthLargerThanFile) {
  EXPECT_ERROR_HAS(parse_error(safetensors_image("{}", "", 1000)), "header length 1000 exceeds the 2 bytes");
  EXPECT_ERROR_HAS(parse_error(safetensors_image("{}", "", ~uint64_t(0))), "exceeds");  // 2^64 - 1
  const std::string huge(101 << 20, ' ');
  EXPECT_ERROR_HAS(parse_error(safetensors_image("{}" + huge, "")), "100 MB limit");
}

TEST(SafetensorsCorrupt, HeaderThatIsNotJson) {
  EXPECT_ERROR_HAS(parse_error(safetensors_image("{\"a\": [1, 2", "")), "header is not valid JSON");
  EXPECT_ERROR_HAS(parse_error(safetensors_image("[1, 2]  ", "")), "does not start with '{'");
  EXPECT_ERROR_HAS(parse_error(safetensors_image("{} xyz", "")), "header is not valid JSON");
  EXPECT_ERROR_HAS(parse_error(safetensors_image("{\"a\": \"\xff\xfe\"}", "")), "header is not valid JSON");
  EXPECT_ERROR_HAS(parse_error(safetensors_image("", "")), "header length is 0");
  std::string deep = "{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_ERROR_HAS(parse_error(safetensors_image(deep, "")), "nested deeper");
}

TEST(SafetensorsCorrupt, LyingOffsets) {
  const std::string data8(8, '\0');
  EXPECT_ERROR_HAS(
      parse_error(safetensors_image(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", data8)),
      "tensor 'w': data_offsets [0, 16] run past the end of the data buffer (8 bytes");
  EXPECT_ERROR_HAS(parse_error(safetensors_image(R"({"a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
                                                  "b": {"dtype": "BF16", "shape": [2], "data_offsets": [2, 6]}})",
                                                 std::string(6, '\0'))),
                   "tensors 'a' and 'b' overlap");
  EXPECT_ERROR_HAS(
      parse_error(safetensors_image(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", data8)),
      "tensor 'w': data_offsets [0, 8] span 8 bytes but shape [3] of F32 needs 12 bytes");
  EXPECT_ERROR_HAS(
      parse_error(safetensors_image(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", data8)),
      "begin > end");
  EXPECT_ERROR_HAS(parse_error(safetensors_image(R"({"a": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]},
                                                  "b": {"dtype": "BF16", "shape": [1], "data_offsets": [4, 6]}})",
                                                 std::string(6, '\0'))),
                   "bytes [2, 4) of the data buffer belong to no tensor (hole before 'b')");
  EXPECT_ERROR_HAS(
      parse_error(safetensors_image(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", data8)),
      "trailing bytes");
  EXPECT_ERROR_HAS(parse_error(safetensors_image(
                       R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 18446744073709551615]}})", data8)),
                   "run past the end");
  EXPECT_ERROR_HAS(
      parse_error(safetensors_image(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", data8)),
      "field 'data_offsets': expected [begin, end]");
  EXPECT_ERROR_HAS(
      parse_error(safetensors_image(
          R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 4], "data_offsets": [0, 8]}})", data8)),
      "too large");
}

TEST(SafetensorsCorrupt, BadDtypeShapeAndMetadata) {
  const std::string data4(4, '\0');
  EXPECT_ERROR_HAS(
      parse_error(safetensors_image(R"({"w": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}})", data4)),
      "bad.safetensors: tensor 'w': unknown dtype 'F99'");
  EXPECT_ERROR_HAS(
      parse_error(safetensors_image(R"({"w": {"dtype": "I32", "shape": [1], "data_offsets": [0, 4]}})", data4)),
      "tensor 'w': unsupported dtype 'I32'");
  EXPECT_ERROR_HAS(parse_error(safetensors_image(R"({"w": {"dtype": 3, "shape": [1], "data_offsets": [0, 4]}})", data4)),
                   "field 'dtype': expected a string, got 3");
  EXPECT_ERROR_HAS(parse_error(safetensors_image(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", data4)),
                   "tensor 'w': missing field 'dtype'");
  EXPECT_ERROR_HAS(
      parse_error(safetensors_image(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", data4)),
      "tensor 'w': field 'shape': expected an array of non-negative integers, got [-1]");
  EXPECT_ERROR_HAS(
      parse_error(safetensors_image(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", data4)),
      "field 'shape': expected an array of non-negative integers");
  EXPECT_ERROR_HAS(parse_error(safetensors_image(R"({"w": [1, 2]})", "")), "tensor 'w': expected an object");
  EXPECT_ERROR_HAS(parse_error(safetensors_image(R"({"__metadata__": {"n": 1}})", "")),
                   "'__metadata__': key 'n': expected a string, got 1");
  EXPECT_ERROR_HAS(parse_error(safetensors_image(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                                  "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                                                 data4)),
                   "the key 'w' twice");
}

TEST(SafetensorsCorrupt, TypedAccessChecksElementSize) {
  const std::string image =
      safetensors_image(R"({"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}})", std::string(4, '\0'));
  auto tensors = parse_safetensors_header(reinterpret_cast<const std::byte*>(image.data()), image.size(), "t");
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_ERROR_HAS(error_of([&] { tensors[0].as<float>(); }), "read as a 4-byte type but its dtype BF16");
}

// ---- checkpoint directories -------------------------------------------------------------------------------------

class ShardedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 4; ++i) tensors_.push_back(make_tensor("t" + std::to_string(i), DType::F32, {25}, i));
    write_checkpoint_weights(dir_.path(), views_of(tensors_), 200);  // 100 bytes each: 2 shards of 2
    ASSERT_TRUE(std::filesystem::exists(dir_ / "model-00002-of-00002.safetensors"));
  }
  void rewrite_index(const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json index = read_json_file(dir_ / "model.safetensors.index.json");
    edit(index);
    test::write_bytes(dir_ / "model.safetensors.index.json", index.dump());
  }
  ScratchDir dir_;
  std::vector<OwnedTensor> tensors_;
};

TEST_F(ShardedCheckpoint, MissingShardNamesTheShardAndATensor) {
  std::filesystem::remove(dir_ / "model-00002-of-00002.safetensors");
  std::string message = error_of([&] { WeightStore::open(dir_.path()); });
  EXPECT_ERROR_HAS(message, "shard 'model-00002-of-00002.safetensors' (holding tensor 't2'");
  EXPECT_ERROR_HAS(message, "does not exist");
}

TEST_F(ShardedCheckpoint, TensorInAnotherShardThanTheIndexSays) {
  rewrite_index([](nlohmann::json& index) { index["weight_map"]["t3"] = "model-00001-of-00002.safetensors"; });
  std::string message = error_of([&] { WeightStore::open(dir_.path()); });
  EXPECT_ERROR_HAS(message, "model-00002-of-00002.safetensors: tensor 't3' is stored here but");
  EXPECT_ERROR_HAS(message, "places it in 'model-00001-of-00002.safetensors'");
}

TEST_F(ShardedCheckpoint, IndexListsATensorNoShardHas) {
  rewrite_index([](nlohmann::json& index) { index["weight_map"]["ghost"] = "model-00001-of-00002.safetensors"; });
  EXPECT_ERROR_HAS(error_of([&] { WeightStore::open(dir_.path()); }),
                   "tensor 'ghost' is placed in shard 'model-00001-of-00002.safetensors' but that shard does not contain it");
}

TEST_F(ShardedCheckpoint, DuplicateTensorAcrossShards) {
  // Shard 2 rewritten to also hold t0, which shard 1 has.
  std::vector<OwnedTensor> second = {tensors_[2], tensors_[3], tensors_[0]};
  write_safetensors(dir_ / "model-00002-of-00002.safetensors", views_of(second));
  std::string message = error_of([&] { WeightStore::open(dir_.path()); });
  EXPECT_ERROR_HAS(message, "tensor 't0' is stored twice");
  EXPECT_ERROR_HAS(message, "model-00001-of-00002.safetensors");
  EXPECT_ERROR_HAS(message, "model-00002-of-00002.safetensors");
}

TEST_F(ShardedCheckpoint, ShardOutsideTheDirectoryIsRefused) {
  rewrite_index([](nlohmann::json& index) { index["weight_map"]["t0"] = "../elsewhere.safetensors"; });
  EXPECT_ERROR_HAS(error_of([&] { WeightStore::open(dir_.path()); }), "is not a plain file name");
}

TEST_F(ShardedCheckpoint, IndexWithoutWeightMap) {
  test::write_bytes(dir_ / "model.safetensors.index.json", R"({"metadata": {}})");
  EXPECT_ERROR_HAS(error_of([&] { WeightStore::open(dir_.path()); }), "missing field 'weight_map'");
}

TEST(WeightStore, MissingWeightsAndMissingTensor) {
  ScratchDir dir;
  EXPECT_ERROR_HAS(error_of([&] { WeightStore::open(dir.path()); }),
                   "no weights found (neither model.safetensors nor model.safetensors.index.json)");
  EXPECT_ERROR_HAS(error_of([&] { WeightStore::open(dir / "nope"); }), "not a directory");
  WeightStore store = WeightStore::open(kGolden / "llama-tiny");
  EXPECT_EQ(store.find("model.layers.0.self_attn.q_norm.weight"), nullptr);
  std::string message = error_of([&] { store.get("model.layers.0.self_attn.q_norm.weight"); });
  EXPECT_ERROR_HAS(message, "no tensor 'model.layers.0.self_attn.q_norm.weight'");
  EXPECT_ERROR_HAS(message, "llama-tiny");
}

}  // namespace
}  // namespace mi::io
