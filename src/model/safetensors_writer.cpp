#include "model/safetensors_writer.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "core/error.h"

namespace imp::model {

namespace {

void write_bytes(std::ofstream& out, const void* data, size_t n) {
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

// Writes length prefix + padded header, then calls write_data; goes to path.tmp, then renames over path so
// readers never see half a file.
template <typename WriteData>
void write_file(const std::filesystem::path& path, std::string_view header_json, WriteData&& write_data) {
  std::string header(header_json);
  // The data region must start at an 8-byte boundary; JSON allows trailing spaces.
  while ((8 + header.size()) % 8 != 0) header.push_back(' ');
  uint8_t prefix[8];
  const uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<uint8_t>(len >> (8 * i));

  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("{}: cannot open for writing: {}", tmp.string(), std::strerror(errno));
    write_bytes(out, prefix, sizeof prefix);
    write_bytes(out, header.data(), header.size());
    write_data(out);
    out.flush();
    if (!out) fail("{}: write failed: {}", tmp.string(), std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail("{}: cannot rename from {}: {}", path.string(), tmp.string(), ec.message());
}

}  // namespace

void write_safetensors_raw(const std::filesystem::path& path, std::string_view header_json,
                           std::span<const uint8_t> data) {
  write_file(path, header_json, [&](std::ofstream& out) { write_bytes(out, data.data(), data.size()); });
}

void write_safetensors(const std::filesystem::path& path, std::span<const SafetensorsTensor> tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (const SafetensorsTensor& t : tensors) {
    if (t.name == "__metadata__" || !names.insert(t.name).second) {
      fail("{}: cannot write tensor '{}': duplicate or reserved name", path.string(), t.name);
    }
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) fail("{}: cannot write tensor '{}': negative dimension {}", path.string(), t.name, d);
      numel *= static_cast<uint64_t>(d);
    }
    if (numel * dtype_size(t.dtype) != t.bytes.size()) {
      fail("{}: cannot write tensor '{}': dtype {} x {} elements needs {} bytes, got {}", path.string(), t.name,
           dtype_name(t.dtype), numel, numel * dtype_size(t.dtype), t.bytes.size());
    }
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  write_file(path, header.dump(), [&](std::ofstream& out) {
    for (const SafetensorsTensor& t : tensors) write_bytes(out, t.bytes.data(), t.bytes.size());
  });
}

}  // namespace imp::model
