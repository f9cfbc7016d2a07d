// Safetensors checkpoints, single file or sharded through model.safetensors.index.json, memory-mapped.
// Every header is validated strictly when the checkpoint is opened (JSON syntax, dtype names, offsets in
// bounds, no overlaps, dtype x shape = bytes, every shard of the index present and every index entry found
// in its shard), so a truncated or corrupt file fails with one line naming the file and the tensor.
//
// Tensor names are canonicalised: `model.language_model.X` and `model.X` become `X`, `lm_head.weight` stays.
// `mtp.*` and `model.visual.*` tensors are recognised and set aside (counted, never loaded).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"

namespace imp::model {

struct TensorInfo {
  std::string name;        // canonical name
  std::string stored_name; // name as written in the file
  std::string file;        // file name (no directory), for error messages
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mapped file
  size_t nbytes = 0;

  int64_t numel() const;
  std::string shape_string() const;  // "[640, 1280]"
};

class MappedFile;  // read-only mmap, defined in checkpoint.cpp

class Checkpoint {
 public:
  // Opens every safetensors file of a model folder; throws imp::Error on any inconsistency.
  static Checkpoint open(const std::filesystem::path& model_dir);

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  // nullptr when absent.
  const TensorInfo* find(std::string_view name) const;
  // Throws imp::Error "checkpoint <dir>: missing tensor <name>" when absent.
  const TensorInfo& get(std::string_view name) const;
  // Like get, and also checks dtype and shape, naming the tensor, its file and both shapes on mismatch.
  const TensorInfo& get(std::string_view name, DType dtype, std::span<const int64_t> shape) const;

  // All text-model tensors in file order (set-aside tensors excluded).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  size_t set_aside_count() const { return set_aside_count_; }
  const std::filesystem::path& dir() const { return dir_; }
  // Sum of the sizes of the mapped files.
  uint64_t file_bytes() const;

 private:
  Checkpoint() = default;
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
  size_t set_aside_count_ = 0;
};

// Canonical name for a stored tensor name; empty when the tensor is set aside (mtp.*, model.visual.*).
std::string canonical_tensor_name(std::string_view stored_name);

}  // namespace imp::model
