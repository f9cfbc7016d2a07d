#include "model/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/error.h"
#include "model/safetensors_writer.h"

namespace imp::model {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A fresh, empty folder per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = fs::temp_directory_path() /
            ("imp_ckpt_test_" + std::to_string(::getpid()) + "_" + std::to_string(stamp) + "_" +
             std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

std::vector<uint8_t> pattern_bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(seed + 31 * i);
  return bytes;
}

SafetensorsTensor make_tensor(std::string name, DType dtype, std::vector<int64_t> shape, uint8_t seed = 1) {
  size_t numel = 1;
  for (int64_t d : shape) numel *= static_cast<size_t>(d);
  auto bytes = pattern_bytes(numel * dtype_size(dtype), seed);
  return {std::move(name), dtype, std::move(shape), std::move(bytes)};
}

void write_index(const fs::path& dir, const std::vector<std::pair<std::string, std::string>>& entries) {
  nlohmann::json index;
  index["metadata"] = {{"total_size", 0}};
  index["weight_map"] = nlohmann::json::object();
  for (const auto& [name, file] : entries) index["weight_map"][name] = file;
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
}

// Runs open() and returns the imp::Error message; fails the test when nothing (or something else) is thrown.
std::string open_error(const fs::path& dir) {
  try {
    Checkpoint::open(dir);
  } catch (const Error& e) {
    std::string message = e.what();
    if (std::getenv("IMP_PRINT_ERRORS") != nullptr) std::printf("  error: %s\n", message.c_str());
    EXPECT_EQ(message.find('\n'), std::string::npos) << "message should be one line: " << message;
    return message;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected imp::Error, got: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected imp::Error, open() succeeded";
  return {};
}

// Header for a single tensor entry, for hand-built (malformed) files.
std::string entry_json(const std::string& name, const std::string& dtype, const std::string& shape, uint64_t begin,
                       uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

TEST(Checkpoint, RoundTripEveryDtype) {
  TempDir dir;
  const std::vector<SafetensorsTensor> tensors = {
      make_tensor("model.embed_tokens.weight", DType::kBF16, {4, 8}, 1),
      make_tensor("model.layers.0.a", DType::kF16, {3}, 2),
      make_tensor("model.layers.0.b", DType::kF32, {2, 3, 2}, 3),
      make_tensor("model.layers.0.c", DType::kF8E4M3, {5, 7}, 4),
      make_tensor("model.layers.0.d", DType::kU8, {9}, 5),
      make_tensor("model.layers.0.e", DType::kI32, {1, 1}, 6),
      make_tensor("model.layers.0.f", DType::kI64, {16}, 7),
      make_tensor("model.layers.0.scalar", DType::kF32, {}, 8),
      make_tensor("model.layers.0.empty", DType::kBF16, {0, 4}, 9),
  };
  write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});

  const Checkpoint ckpt = Checkpoint::open(dir.path());
  ASSERT_EQ(ckpt.tensors().size(), tensors.size());
  EXPECT_EQ(ckpt.set_aside_count(), 0u);
  EXPECT_EQ(ckpt.file_bytes(), fs::file_size(dir / "model.safetensors"));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SafetensorsTensor& want = tensors[i];
    const std::string canonical = want.name.substr(std::string("model.").size());
    SCOPED_TRACE(canonical);
    const TensorInfo& got = ckpt.get(canonical, want.dtype, want.shape);
    EXPECT_EQ(&got, &ckpt.tensors()[i]) << "tensors() keeps file order";
    EXPECT_EQ(got.stored_name, want.name);
    EXPECT_EQ(got.file, "model.safetensors");
    EXPECT_EQ(got.shape, want.shape);
    ASSERT_EQ(got.nbytes, want.bytes.size());
    EXPECT_EQ(got.numel() * static_cast<int64_t>(dtype_size(got.dtype)), static_cast<int64_t>(got.nbytes));
    if (got.nbytes > 0) {
      EXPECT_EQ(std::memcmp(got.data, want.bytes.data(), got.nbytes), 0);
    }
  }
  EXPECT_EQ(ckpt.get("layers.0.b").shape_string(), "[2, 3, 2]");
  EXPECT_EQ(ckpt.get("layers.0.scalar").shape_string(), "[]");
  EXPECT_EQ(ckpt.get("layers.0.scalar").numel(), 1);
  EXPECT_EQ(ckpt.get("layers.0.empty").numel(), 0);
  EXPECT_EQ(ckpt.find("nope"), nullptr);
}

TEST(Checkpoint, DataRegionIsEightByteAligned) {
  TempDir dir;
  write_safetensors(dir / "model.safetensors", std::vector{make_tensor("x", DType::kF32, {3})});
  std::ifstream in(dir / "model.safetensors", std::ios::binary);
  uint8_t prefix[8];
  in.read(reinterpret_cast<char*>(prefix), 8);
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | prefix[i];
  EXPECT_EQ((8 + len) % 8, 0u);
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ckpt.get("x").data) % 8, 0u);
}

TEST(Checkpoint, ShardedWithIndex) {
  TempDir dir;
  const auto a = make_tensor("model.language_model.layers.0.w", DType::kBF16, {2, 4}, 1);
  const auto b = make_tensor("model.language_model.layers.1.w", DType::kBF16, {2, 4}, 2);
  const auto c = make_tensor("lm_head.weight", DType::kF32, {4, 2}, 3);
  const auto m = make_tensor("mtp.fc.weight", DType::kBF16, {2}, 4);
  write_safetensors(dir / "model-00001-of-00002.safetensors", std::vector{a, b});
  write_safetensors(dir / "model-00002-of-00002.safetensors", std::vector{c, m});
  write_index(dir.path(), {{a.name, "model-00001-of-00002.safetensors"},
                           {b.name, "model-00001-of-00002.safetensors"},
                           {c.name, "model-00002-of-00002.safetensors"},
                           {m.name, "model-00002-of-00002.safetensors"}});
  // A stray file the index does not name is ignored.
  write_safetensors(dir / "stray.safetensors", std::vector{make_tensor("model.stray", DType::kU8, {1})});

  const Checkpoint ckpt = Checkpoint::open(dir.path());
  ASSERT_EQ(ckpt.tensors().size(), 3u);
  EXPECT_EQ(ckpt.set_aside_count(), 1u);
  EXPECT_EQ(ckpt.find("stray"), nullptr);
  EXPECT_EQ(ckpt.file_bytes(), fs::file_size(dir / "model-00001-of-00002.safetensors") +
                                   fs::file_size(dir / "model-00002-of-00002.safetensors"));
  const TensorInfo& w1 = ckpt.get("layers.1.w", DType::kBF16, std::vector<int64_t>{2, 4});
  EXPECT_EQ(w1.file, "model-00001-of-00002.safetensors");
  EXPECT_EQ(std::memcmp(w1.data, b.bytes.data(), b.bytes.size()), 0);
  const TensorInfo& head = ckpt.get("lm_head.weight");
  EXPECT_EQ(head.file, "model-00002-of-00002.safetensors");
  EXPECT_EQ(std::memcmp(head.data, c.bytes.data(), c.bytes.size()), 0);
  EXPECT_EQ(ckpt.tensors()[0].name, "layers.0.w");
  EXPECT_EQ(ckpt.tensors()[2].name, "lm_head.weight");
}

TEST(Checkpoint, SeveralFilesWithoutIndexAreAllOpened) {
  TempDir dir;
  write_safetensors(dir / "b.safetensors", std::vector{make_tensor("model.y", DType::kF32, {2})});
  write_safetensors(dir / "a.safetensors", std::vector{make_tensor("model.x", DType::kF32, {2})});
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  ASSERT_EQ(ckpt.tensors().size(), 2u);
  EXPECT_EQ(ckpt.tensors()[0].name, "x");  // files in sorted order
  EXPECT_EQ(ckpt.tensors()[1].file, "b.safetensors");
}

TEST(Checkpoint, CanonicalNames) {
  EXPECT_EQ(canonical_tensor_name("model.language_model.layers.3.mlp.gate.weight"), "layers.3.mlp.gate.weight");
  EXPECT_EQ(canonical_tensor_name("model.layers.3.mlp.gate.weight"), "layers.3.mlp.gate.weight");
  EXPECT_EQ(canonical_tensor_name("model.language_model.embed_tokens.weight"), "embed_tokens.weight");
  EXPECT_EQ(canonical_tensor_name("lm_head.weight"), "lm_head.weight");
  EXPECT_EQ(canonical_tensor_name("mtp.fc_hidden.weight"), "");
  EXPECT_EQ(canonical_tensor_name("mtp.layers.0.mlp.experts.3.up_proj.weight"), "");
  EXPECT_EQ(canonical_tensor_name("model.visual.blocks.0.attn.qkv.weight"), "");
  EXPECT_EQ(canonical_tensor_name("visual.merger.weight"), "");
}

TEST(Checkpoint, CanonicalisesAndSetsAside) {
  TempDir dir;
  write_safetensors(dir / "model.safetensors",
                    std::vector{make_tensor("model.language_model.embed_tokens.weight", DType::kBF16, {4, 2}),
                                make_tensor("model.norm.weight", DType::kBF16, {2}),
                                make_tensor("lm_head.weight", DType::kBF16, {4, 2}),
                                make_tensor("mtp.fc_hidden.weight", DType::kBF16, {2, 2}),
                                make_tensor("model.visual.blocks.0.w", DType::kBF16, {2}),
                                make_tensor("visual.merger.w", DType::kBF16, {2})});
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_EQ(ckpt.tensors().size(), 3u);
  EXPECT_EQ(ckpt.set_aside_count(), 3u);
  EXPECT_EQ(ckpt.get("embed_tokens.weight").stored_name, "model.language_model.embed_tokens.weight");
  EXPECT_EQ(ckpt.get("norm.weight").stored_name, "model.norm.weight");
  EXPECT_NE(ckpt.find("lm_head.weight"), nullptr);
  for (const TensorInfo& t : ckpt.tensors()) {
    EXPECT_FALSE(t.name.starts_with("mtp.") || t.name.find("visual") != std::string::npos) << t.name;
  }
}

TEST(Checkpoint, TwoNamesCanonicaliseToOne) {
  TempDir dir;
  write_safetensors(dir / "model.safetensors",
                    std::vector{make_tensor("model.language_model.norm.weight", DType::kBF16, {2}),
                                make_tensor("model.norm.weight", DType::kBF16, {2})});
  EXPECT_THAT(open_error(dir.path()), AllOf(HasSubstr("model.language_model.norm.weight"),
                                            HasSubstr("'model.norm.weight'"), HasSubstr("model.safetensors")));
}

TEST(Checkpoint, GetMissingTensor) {
  TempDir dir;
  write_safetensors(dir / "model.safetensors", std::vector{make_tensor("model.x", DType::kF32, {1})});
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  try {
    ckpt.get("layers.7.nope");
    FAIL() << "expected imp::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(dir.path().string()), HasSubstr("missing tensor 'layers.7.nope'")));
  }
}

TEST(Checkpoint, GetDtypeOrShapeMismatch) {
  TempDir dir;
  write_safetensors(dir / "model.safetensors",
                    std::vector{make_tensor("model.layers.0.mlp.gate.weight", DType::kF32, {4, 8})});
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  const std::vector<int64_t> right{4, 8}, wrong{8, 4};
  EXPECT_NO_THROW(ckpt.get("layers.0.mlp.gate.weight", DType::kF32, right));
  try {
    ckpt.get("layers.0.mlp.gate.weight", DType::kBF16, right);
    FAIL() << "expected imp::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tensor 'layers.0.mlp.gate.weight' in model.safetensors has dtype F32 shape "
                                    "[4, 8], expected BF16 [4, 8]"));
  }
  try {
    ckpt.get("layers.0.mlp.gate.weight", DType::kF32, wrong);
    FAIL() << "expected imp::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("has dtype F32 shape [4, 8], expected F32 [8, 4]"));
  }
}

TEST(Checkpoint, TruncatedFile) {
  TempDir dir;
  const fs::path file = dir / "model.safetensors";
  write_safetensors(file, std::vector{make_tensor("model.a", DType::kF32, {4}),
                                      make_tensor("model.last", DType::kF32, {4})});
  fs::resize_file(file, fs::file_size(file) - 3);
  EXPECT_THAT(open_error(dir.path()),
              AllOf(HasSubstr("model.safetensors"), HasSubstr("'model.last'"), HasSubstr("truncated?")));
}

TEST(Checkpoint, FileShorterThanLengthPrefix) {
  TempDir dir;
  std::ofstream(dir / "model.safetensors", std::ios::binary) << "abc";
  EXPECT_THAT(open_error(dir.path()), AllOf(HasSubstr("model.safetensors"), HasSubstr("3 bytes")));
}

TEST(Checkpoint, HeaderLengthPastEnd) {
  TempDir dir;
  const fs::path file = dir / "model.safetensors";
  write_safetensors(file, std::vector{make_tensor("model.a", DType::kF32, {4})});
  const uint64_t size = fs::file_size(file);
  std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
  const uint8_t huge[8] = {0x00, 0x10, 0, 0, 0, 0, 0, 0};  // 4096 bytes
  f.write(reinterpret_cast<const char*>(huge), 8);
  f.close();
  EXPECT_THAT(open_error(dir.path()),
              AllOf(HasSubstr("model.safetensors"),
                    HasSubstr("header says 4096 bytes, file has " + std::to_string(size))));
}

TEST(Checkpoint, HeaderPointsPastEnd) {
  TempDir dir;
  write_safetensors_raw(dir / "model.safetensors", "{" + entry_json("model.big", "F32", "[4]", 0, 16) + "}",
                        pattern_bytes(12, 0));
  EXPECT_THAT(open_error(dir.path()), AllOf(HasSubstr("model.safetensors"), HasSubstr("'model.big'"),
                                            HasSubstr("points past the end of the file")));
}

TEST(Checkpoint, InvalidJson) {
  TempDir dir;
  write_safetensors_raw(dir / "model.safetensors", "{\"model.a\": {\"dtype\": \"F32\",", {});
  EXPECT_THAT(open_error(dir.path()),
              AllOf(HasSubstr("model.safetensors"), HasSubstr("not valid JSON"), HasSubstr("parse error")));
}

TEST(Checkpoint, HeaderNotAnObject) {
  TempDir dir;
  write_safetensors_raw(dir / "model.safetensors", "[1, 2]", {});
  EXPECT_THAT(open_error(dir.path()), AllOf(HasSubstr("model.safetensors"), HasSubstr("not a JSON object")));
}

TEST(Checkpoint, MalformedEntries) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\"model.t\": 5", "not a JSON object"},
      {"\"model.t\": {\"shape\": [1], \"data_offsets\": [0, 4]}", "no \"dtype\""},
      {"\"model.t\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}", "no \"shape\""},
      {"\"model.t\": {\"dtype\": \"F32\", \"shape\": [1]}", "no \"data_offsets\""},
      {"\"model.t\": {\"dtype\": 7, \"shape\": [1], \"data_offsets\": [0, 4]}", "\"dtype\" is not a string"},
      {"\"model.t\": {\"dtype\": \"F32\", \"shape\": 1, \"data_offsets\": [0, 4]}", "\"shape\" is not an array"},
      {"\"model.t\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}", "non-negative integers"},
      {"\"model.t\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}", "negative dimension -1"},
      {"\"model.t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}", "[begin, end]"},
      {"\"model.t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, \"4\"]}", "[begin, end]"},
      {"\"model.t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 0]}", "begin after end"},
      {"\"model.t\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 4]}",
       "too large"},
      {"\"model.t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, \"model.t\": {}",
       "appears twice"},
  };
  for (const auto& [body, expected] : cases) {
    SCOPED_TRACE(body);
    TempDir dir;
    write_safetensors_raw(dir / "model.safetensors", "{" + body + "}", pattern_bytes(8, 0));
    EXPECT_THAT(open_error(dir.path()),
                AllOf(HasSubstr("model.safetensors"), HasSubstr("'model.t'"), HasSubstr(expected)));
  }
}

TEST(Checkpoint, OverlappingTensors) {
  TempDir dir;
  write_safetensors_raw(dir / "model.safetensors",
                        "{" + entry_json("model.first", "F32", "[4]", 0, 16) + "," +
                            entry_json("model.second", "F32", "[2]", 12, 20) + "}",
                        pattern_bytes(20, 0));
  EXPECT_THAT(open_error(dir.path()), AllOf(HasSubstr("model.safetensors"), HasSubstr("'model.first'"),
                                            HasSubstr("'model.second'"), HasSubstr("overlap")));
}

TEST(Checkpoint, EmptyTensorInsideAnotherIsNotAnOverlap) {
  TempDir dir;
  write_safetensors_raw(dir / "model.safetensors",
                        "{" + entry_json("model.full", "F32", "[4]", 0, 16) + "," +
                            entry_json("model.empty", "F32", "[0]", 8, 8) + "}",
                        pattern_bytes(16, 0));
  EXPECT_EQ(Checkpoint::open(dir.path()).tensors().size(), 2u);
}

TEST(Checkpoint, BytesDoNotMatchDtypeAndShape) {
  TempDir dir;
  write_safetensors_raw(dir / "model.safetensors", "{" + entry_json("model.odd", "BF16", "[3, 4]", 0, 20) + "}",
                        pattern_bytes(24, 0));
  EXPECT_THAT(open_error(dir.path()),
              AllOf(HasSubstr("model.safetensors"), HasSubstr("'model.odd'"),
                    HasSubstr("dtype BF16 shape [3, 4] needs 24 bytes but data_offsets [0, 20] span 20")));
}

TEST(Checkpoint, UnknownDtype) {
  TempDir dir;
  write_safetensors_raw(dir / "model.safetensors", "{" + entry_json("model.q", "F8_E5M2", "[4]", 0, 4) + "}",
                        pattern_bytes(4, 0));
  EXPECT_THAT(open_error(dir.path()),
              AllOf(HasSubstr("model.safetensors"), HasSubstr("'model.q'"), HasSubstr("unsupported dtype 'F8_E5M2'")));
}

TEST(Checkpoint, MissingShard) {
  TempDir dir;
  const auto a = make_tensor("model.a", DType::kF32, {2});
  write_safetensors(dir / "model-00001-of-00002.safetensors", std::vector{a});
  write_index(dir.path(), {{"model.a", "model-00001-of-00002.safetensors"},
                           {"model.b", "model-00002-of-00002.safetensors"}});
  EXPECT_THAT(open_error(dir.path()), AllOf(HasSubstr("missing shard 'model-00002-of-00002.safetensors'"),
                                            HasSubstr("'model.b'")));
}

TEST(Checkpoint, IndexEntryAbsentFromShard) {
  TempDir dir;
  write_safetensors(dir / "model-00001-of-00001.safetensors", std::vector{make_tensor("model.a", DType::kF32, {2})});
  write_index(dir.path(), {{"model.a", "model-00001-of-00001.safetensors"},
                           {"model.ghost", "model-00001-of-00001.safetensors"}});
  EXPECT_THAT(open_error(dir.path()),
              AllOf(HasSubstr("model-00001-of-00001.safetensors"), HasSubstr("'model.ghost'"),
                    HasSubstr("does not contain it")));
}

TEST(Checkpoint, UnexpectedTensorInShard) {
  TempDir dir;
  write_safetensors(dir / "model-00001-of-00001.safetensors",
                    std::vector{make_tensor("model.a", DType::kF32, {2}), make_tensor("model.extra", DType::kF32, {2})});
  write_index(dir.path(), {{"model.a", "model-00001-of-00001.safetensors"}});
  EXPECT_THAT(open_error(dir.path()), AllOf(HasSubstr("model-00001-of-00001.safetensors"),
                                            HasSubstr("'model.extra'"), HasSubstr("does not mention")));
}

TEST(Checkpoint, ShardTensorThatIndexPlacesElsewhere) {
  TempDir dir;
  write_safetensors(dir / "s1.safetensors", std::vector{make_tensor("model.a", DType::kF32, {2})});
  write_safetensors(dir / "s2.safetensors",
                    std::vector{make_tensor("model.b", DType::kF32, {2}), make_tensor("model.a", DType::kF32, {2})});
  write_index(dir.path(), {{"model.a", "s1.safetensors"}, {"model.b", "s2.safetensors"}});
  EXPECT_THAT(open_error(dir.path()), AllOf(HasSubstr("s2.safetensors"), HasSubstr("'model.a'")));
}

TEST(Checkpoint, DuplicateNamesAcrossFiles) {
  TempDir dir;
  write_safetensors(dir / "part-a.safetensors", std::vector{make_tensor("model.dup", DType::kF32, {2})});
  write_safetensors(dir / "part-b.safetensors", std::vector{make_tensor("model.dup", DType::kF32, {2})});
  EXPECT_THAT(open_error(dir.path()), AllOf(HasSubstr("duplicate tensor 'model.dup'"),
                                            HasSubstr("part-a.safetensors"), HasSubstr("part-b.safetensors")));
}

TEST(Checkpoint, InvalidIndexJson) {
  TempDir dir;
  std::ofstream(dir / "model.safetensors.index.json") << "{\"weight_map\": {";
  EXPECT_THAT(open_error(dir.path()), AllOf(HasSubstr("model.safetensors.index.json"), HasSubstr("not valid JSON")));
}

TEST(Checkpoint, EmptyFolder) {
  TempDir dir;
  std::ofstream(dir / "config.json") << "{}";
  EXPECT_THAT(open_error(dir.path()),
              AllOf(HasSubstr(dir.path().string()), HasSubstr("holds no safetensors checkpoint")));
}

TEST(Checkpoint, NotADirectory) {
  TempDir dir;
  EXPECT_THAT(open_error(dir / "does-not-exist"), HasSubstr("not a directory"));
}

TEST(Checkpoint, WriterRejectsWrongByteCount) {
  TempDir dir;
  SafetensorsTensor bad = make_tensor("x", DType::kBF16, {2, 2});
  bad.bytes.pop_back();
  EXPECT_THROW(write_safetensors(dir / "model.safetensors", std::vector{bad}), Error);
  EXPECT_THROW(write_safetensors(dir / "model.safetensors",
                                 std::vector{make_tensor("x", DType::kU8, {1}), make_tensor("x", DType::kU8, {1})}),
               Error);
}

TEST(Checkpoint, MovedCheckpointKeepsMappings) {
  TempDir dir;
  const auto t = make_tensor("model.x", DType::kI32, {3}, 42);
  write_safetensors(dir / "model.safetensors", std::vector{t});
  Checkpoint first = Checkpoint::open(dir.path());
  const uint8_t* data = first.get("x").data;
  Checkpoint second = std::move(first);
  EXPECT_EQ(second.get("x").data, data);
  EXPECT_EQ(std::memcmp(second.get("x").data, t.bytes.data(), t.bytes.size()), 0);
}

}  // namespace
}  // namespace imp::model
