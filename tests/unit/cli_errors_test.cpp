// Bad input through the command line: each corrupt checkpoint or invalid config makes `imp generate`
// exit with status 1 and one clear line on stderr naming what is wrong, never a crash or a hang.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/safetensors_writer.h"

namespace imp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path golden_dir() { return fs::path(IMP_SOURCE_DIR) / "tests" / "fixtures" / "golden"; }

// The first fixture whose checkpoint is one file (or, with sharded = true, an index with shards).
fs::path find_fixture(bool sharded) {
  for (const auto& entry : fs::directory_iterator(golden_dir())) {
    const bool has_index = fs::exists(entry.path() / "model.safetensors.index.json");
    const bool has_single = fs::exists(entry.path() / "model.safetensors");
    if (sharded ? has_index : (has_single && !has_index)) return entry.path();
  }
  return {};
}

struct Result {
  int status = -1;
  std::string stderr_text;
};

class CliErrors : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("imp_cli_errors_{}_{}", ::getpid(),
                                                   testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Copies a fixture model folder into the test's own folder.
  void copy_fixture(bool sharded) {
    const fs::path source = find_fixture(sharded);
    ASSERT_FALSE(source.empty()) << "no suitable fixture in " << golden_dir();
    fs::copy(source, dir_, fs::copy_options::recursive);
  }

  Result run_generate() const {
    const fs::path err = dir_.string() + ".stderr";
    const std::string command = fmt::format("{} generate --model {} --prompt-tokens 1,2,3 --max-tokens 2 > /dev/null 2> {}",
                                            IMP_BINARY, dir_.string(), err.string());
    const int raw = std::system(command.c_str());
    Result result;
    result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    std::ifstream in(err);
    result.stderr_text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    fs::remove(err);
    return result;
  }

  // The failure must be a clean exit 1 with one line that contains every expected fragment.
  void expect_error(std::initializer_list<std::string> fragments) const {
    const Result result = run_generate();
    EXPECT_EQ(result.status, 1) << result.stderr_text;
    EXPECT_NE(result.stderr_text.find("imp: error: "), std::string::npos) << result.stderr_text;
    EXPECT_EQ(std::count(result.stderr_text.begin(), result.stderr_text.end(), '\n'), 1) << result.stderr_text;
    for (const std::string& fragment : fragments) {
      EXPECT_NE(result.stderr_text.find(fragment), std::string::npos) << "missing '" << fragment << "' in: " << result.stderr_text;
    }
  }

  json read_config() const {
    std::ifstream in(dir_ / "config.json");
    return json::parse(in);
  }
  void write_config(const json& config) const { std::ofstream(dir_ / "config.json") << config.dump(2); }
  json& text_config(json& config) const { return config.contains("text_config") ? config["text_config"] : config; }

  // Splits model.safetensors into its header JSON and data region, lets `edit` change the header, writes it back.
  void edit_header(const std::function<void(json&)>& edit) const {
    const fs::path path = dir_ / "model.safetensors";
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    uint64_t length = 0;
    std::memcpy(&length, bytes.data(), sizeof length);
    json header = json::parse(bytes.substr(8, length));
    edit(header);
    const std::string data = bytes.substr(8 + length);
    model::write_safetensors_raw(path, header.dump(),
                                 std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  }

  // A dense 2-D tensor of the header, by name suffix.
  static std::string find_tensor(const json& header, const std::string& suffix) {
    for (const auto& [name, entry] : header.items()) {
      if (name.ends_with(suffix)) return name;
    }
    return {};
  }

  fs::path dir_;
};

TEST_F(CliErrors, HealthyCopyRuns) {
  copy_fixture(false);
  EXPECT_EQ(run_generate().status, 0);
}

TEST_F(CliErrors, TruncatedSafetensors) {
  copy_fixture(false);
  const fs::path path = dir_ / "model.safetensors";
  fs::resize_file(path, fs::file_size(path) - 100);
  expect_error({"model.safetensors", "truncated"});
}

TEST_F(CliErrors, HeaderPointsPastTheEnd) {
  copy_fixture(false);
  std::string tensor;
  edit_header([&](json& header) {
    // Move the last tensor of the data region beyond the end of the file.
    uint64_t last_end = 0;
    for (const auto& [name, entry] : header.items()) {
      if (name != "__metadata__" && entry["data_offsets"][1].get<uint64_t>() >= last_end) {
        last_end = entry["data_offsets"][1].get<uint64_t>();
        tensor = name;
      }
    }
    header[tensor]["data_offsets"] = {last_end + 64, last_end + 64 + (last_end - header[tensor]["data_offsets"][0].get<uint64_t>())};
  });
  expect_error({"model.safetensors", tensor, "past the end"});
}

TEST_F(CliErrors, DtypeDoesNotMatchBytes) {
  copy_fixture(false);
  std::string tensor;
  edit_header([&](json& header) {
    tensor = find_tensor(header, "embed_tokens.weight");
    header[tensor]["dtype"] = "F32";  // twice the bytes the offsets hold
  });
  expect_error({"model.safetensors", tensor});
}

TEST_F(CliErrors, ShapeDoesNotMatchTheModel) {
  copy_fixture(false);
  std::string tensor;
  edit_header([&](json& header) {
    tensor = find_tensor(header, "layers.0.mlp.shared_expert.gate_proj.weight");
    auto shape = header[tensor]["shape"];
    header[tensor]["shape"] = {shape[1], shape[0]};  // same bytes, transposed
  });
  expect_error({"layers.0.mlp.shared_expert.gate_proj.weight", "model.safetensors", "expected"});
}

TEST_F(CliErrors, MissingTensor) {
  copy_fixture(false);
  edit_header([&](json& header) { header.erase(find_tensor(header, "layers.0.mlp.gate.weight")); });
  expect_error({"missing tensor", "layers.0.mlp.gate.weight"});
}

TEST_F(CliErrors, UnexpectedTensor) {
  copy_fixture(false);
  edit_header([&](json& header) {
    // Reuse the bytes of an existing tensor under a name the model does not have.
    const std::string source = find_tensor(header, "layers.0.mlp.gate.weight");
    json extra = header[source];
    header["model.layers.0.mlp.surprise.weight"] = extra;
    header[source]["data_offsets"] = extra["data_offsets"];
  });
  const Result result = run_generate();
  EXPECT_EQ(result.status, 1);
  // Two tensors sharing bytes is itself corruption; either diagnosis names the new tensor.
  EXPECT_NE(result.stderr_text.find("surprise"), std::string::npos) << result.stderr_text;
}

TEST_F(CliErrors, MissingShard) {
  copy_fixture(true);
  std::ifstream in(dir_ / "model.safetensors.index.json");
  const json index = json::parse(in);
  const std::string shard = index["weight_map"].begin().value().get<std::string>();
  fs::remove(dir_ / shard);
  expect_error({shard, "missing"});
}

TEST_F(CliErrors, UnsupportedLayerType) {
  copy_fixture(false);
  json config = read_config();
  text_config(config)["layer_types"][0] = "mamba2";
  write_config(config);
  expect_error({"config.json", "layer_types", "mamba2"});
}

TEST_F(CliErrors, InvalidConfigValues) {
  copy_fixture(false);
  json config = read_config();
  text_config(config)["hc_count"] = 1;
  write_config(config);
  expect_error({"config.json", "hc_count"});

  config = read_config();
  text_config(config)["hc_count"] = 4;
  text_config(config)["num_experts_per_tok"] = 100000;
  write_config(config);
  expect_error({"config.json", "num_experts_per_tok"});
}

TEST_F(CliErrors, ConfigThatDisagreesWithTheCheckpoint) {
  copy_fixture(false);
  json config = read_config();
  text_config(config)["num_experts"] = text_config(config)["num_experts"].get<int>() + 1;
  write_config(config);
  expect_error({"layers.0.mlp.gate.weight", "expected"});
}

TEST_F(CliErrors, MalformedConfigJson) {
  copy_fixture(false);
  std::ofstream(dir_ / "config.json") << "{\"hidden_size\": 64,";
  expect_error({"config.json"});
}

TEST_F(CliErrors, EmptyFolder) {
  fs::create_directories(dir_);
  expect_error({"config.json"});
}

}  // namespace
}  // namespace imp
