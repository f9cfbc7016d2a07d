// Writes one safetensors file: 8-byte little-endian header length, JSON header padded with spaces so the
// data region starts 8-byte aligned, then the tensors back to back in the given order (no holes, as the
// format requires). Used by tests and by tools that export or repack checkpoints.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace imp::model {

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // exactly dtype_size(dtype) * product(shape) bytes
};

// Throws imp::Error on duplicate names, negative dims, a byte count that does not match dtype x shape, or an
// I/O failure. The file is written under a temporary name and renamed, so readers never see half a file.
void write_safetensors(const std::filesystem::path& path, std::span<const SafetensorsTensor> tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Low level: writes the length prefix, `header_json` (space-padded to 8-byte alignment) and `data` verbatim,
// with no validation. Lets tests build deliberately malformed files.
void write_safetensors_raw(const std::filesystem::path& path, std::string_view header_json,
                           std::span<const uint8_t> data);

}  // namespace imp::model
