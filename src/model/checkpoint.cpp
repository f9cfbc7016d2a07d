#include "model/checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "core/error.h"

namespace imp::model {

namespace fs = std::filesystem;
using nlohmann::json;

// Read-only private mapping of one whole file; unmapped and closed on destruction.
class MappedFile {
 public:
  explicit MappedFile(const fs::path& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail("{}: cannot open: {}", path.string(), std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      const int err = errno;
      ::close(fd_);
      fail("{}: cannot stat: {}", path.string(), std::strerror(err));
    }
    size_ = static_cast<uint64_t>(st.st_size);
    // mmap rejects length 0; an empty file is reported as too short by the header parser.
    if (size_ == 0) return;
    void* addr = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      ::close(fd_);
      fail("{}: cannot mmap {} bytes: {}", path.string(), size_, std::strerror(err));
    }
    data_ = static_cast<const uint8_t*>(addr);
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const fs::path& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  fs::path path_;
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::shape_string() const { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::string canonical_tensor_name(std::string_view stored_name) {
  constexpr std::string_view kSetAside[] = {"mtp.", "model.visual.", "visual."};
  for (std::string_view prefix : kSetAside) {
    if (stored_name.starts_with(prefix)) return {};
  }
  constexpr std::string_view kLanguageModel = "model.language_model.";
  constexpr std::string_view kModel = "model.";
  if (stored_name.starts_with(kLanguageModel)) return std::string(stored_name.substr(kLanguageModel.size()));
  if (stored_name.starts_with(kModel)) return std::string(stored_name.substr(kModel.size()));
  return std::string(stored_name);
}

namespace {

constexpr std::string_view kSingleFile = "model.safetensors";
constexpr std::string_view kIndexFile = "model.safetensors.index.json";

// One header entry, validated against its file but not yet canonicalised.
struct RawTensor {
  std::string stored_name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::string supported_dtypes() {
  std::string out;
  for (DType d : {DType::kBF16, DType::kF16, DType::kF32, DType::kF8E4M3, DType::kU8, DType::kI32, DType::kI64}) {
    if (!out.empty()) out += ", ";
    out += dtype_name(d);
  }
  return out;
}

// JSON parse with a callback that rejects repeated top-level keys, which nlohmann would silently merge.
json parse_json(const char* begin, const char* end, const std::string& what, bool check_duplicates) {
  std::set<std::string> seen;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (check_duplicates && depth == 1 && event == json::parse_event_t::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second) fail("{}: tensor '{}' appears twice in the header", what, key);
    }
    return true;
  };
  try {
    return json::parse(begin, end, callback);
  } catch (const json::exception& e) {
    fail("{}: header is not valid JSON: {}", what, e.what());
  }
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Validates one entry of a header and returns it; `file` is the path used in messages.
RawTensor parse_entry(const std::string& file, const std::string& name, const json& entry, uint64_t data_size) {
  if (!entry.is_object()) fail("{}: tensor '{}': header entry is not a JSON object", file, name);
  RawTensor t;
  t.stored_name = name;

  const auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end()) fail("{}: tensor '{}': header entry has no \"dtype\"", file, name);
  if (!dtype_it->is_string()) fail("{}: tensor '{}': \"dtype\" is not a string", file, name);
  const auto& dtype_str = dtype_it->get_ref<const std::string&>();
  const auto dtype = dtype_from_name(dtype_str);
  if (!dtype) fail("{}: tensor '{}': unsupported dtype '{}' (supported: {})", file, name, dtype_str, supported_dtypes());
  t.dtype = *dtype;

  const auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) fail("{}: tensor '{}': header entry has no \"shape\"", file, name);
  if (!shape_it->is_array()) fail("{}: tensor '{}': \"shape\" is not an array", file, name);
  uint64_t numel = 1;
  bool overflow = false;
  for (const json& dim : *shape_it) {
    if (dim.is_number_integer() && !dim.is_number_unsigned()) {
      fail("{}: tensor '{}': negative dimension {} in shape {}", file, name, dim.get<int64_t>(), shape_it->dump());
    }
    if (!dim.is_number_unsigned() || dim.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}) {
      fail("{}: tensor '{}': shape {} must hold non-negative integers", file, name, shape_it->dump());
    }
    const uint64_t d = dim.get<uint64_t>();
    t.shape.push_back(static_cast<int64_t>(d));
    overflow = overflow || __builtin_mul_overflow(numel, d, &numel);
  }

  const auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end()) fail("{}: tensor '{}': header entry has no \"data_offsets\"", file, name);
  const json& offsets = *offsets_it;
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    fail("{}: tensor '{}': \"data_offsets\" {} must be [begin, end] with non-negative integers", file, name,
         offsets.dump());
  }
  t.begin = offsets[0].get<uint64_t>();
  t.end = offsets[1].get<uint64_t>();
  if (t.begin > t.end) fail("{}: tensor '{}': data_offsets [{}, {}] begin after end", file, name, t.begin, t.end);
  if (t.end > data_size) {
    fail("{}: tensor '{}': data_offsets [{}, {}] points past the end of the file (data region holds {} bytes; "
         "truncated?)",
         file, name, t.begin, t.end, data_size);
  }
  uint64_t expected = 0;
  overflow = overflow || __builtin_mul_overflow(numel, dtype_size(t.dtype), &expected);
  if (overflow) {
    fail("{}: tensor '{}': dtype {} shape {} is too large (byte count overflows 64 bits)", file, name, dtype_str,
         shape_text(t.shape));
  }
  if (expected != t.end - t.begin) {
    fail("{}: tensor '{}': dtype {} shape {} needs {} bytes but data_offsets [{}, {}] span {}", file, name,
         dtype_str, shape_text(t.shape), expected, t.begin, t.end, t.end - t.begin);
  }
  return t;
}

// Parses and validates the header of one mapped file; the result is sorted by data offset.
std::vector<RawTensor> parse_header(const MappedFile& mf) {
  const std::string file = mf.path().string();
  if (mf.size() < 8) {
    fail("{}: {} bytes, shorter than the 8-byte header length of a safetensors file (truncated?)", file, mf.size());
  }
  const uint64_t header_len = read_u64_le(mf.data());
  if (header_len > mf.size() - 8) {
    fail("{}: header says {} bytes, file has {} (truncated, or not a safetensors file?)", file, header_len,
         mf.size());
  }
  const char* header = reinterpret_cast<const char*>(mf.data() + 8);
  const json root = parse_json(header, header + header_len, file, true);
  if (!root.is_object()) fail("{}: header is not a JSON object", file);

  const uint64_t data_size = mf.size() - 8 - header_len;
  std::vector<RawTensor> tensors;
  tensors.reserve(root.size());
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("{}: \"__metadata__\" is not a JSON object", file);
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) fail("{}: \"__metadata__\" value for '{}' is not a string", file, key);
      }
      continue;
    }
    tensors.push_back(parse_entry(file, name, entry, data_size));
  }

  std::sort(tensors.begin(), tensors.end(), [](const RawTensor& a, const RawTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  // Empty tensors occupy no bytes, so they cannot overlap anything.
  const RawTensor* prev = nullptr;
  for (const RawTensor& t : tensors) {
    if (t.begin == t.end) continue;
    if (prev != nullptr && t.begin < prev->end) {
      fail("{}: tensors '{}' [{}, {}) and '{}' [{}, {}) overlap", file, prev->stored_name, prev->begin, prev->end,
           t.stored_name, t.begin, t.end);
    }
    prev = &t;
  }
  return tensors;
}

json read_json_file(const fs::path& path) {
  std::unique_ptr<MappedFile> mf = std::make_unique<MappedFile>(path);
  const char* begin = reinterpret_cast<const char*>(mf->data());
  const std::string what = path.string();
  try {
    return json::parse(begin, begin + mf->size());
  } catch (const json::exception& e) {
    fail("{}: not valid JSON: {}", what, e.what());
  }
}

// Reads model.safetensors.index.json: stored tensor name -> shard file name.
std::map<std::string, std::string> read_index(const fs::path& index_path) {
  const std::string what = index_path.string();
  const json root = read_json_file(index_path);
  if (!root.is_object()) fail("{}: not a JSON object", what);
  const auto map_it = root.find("weight_map");
  if (map_it == root.end() || !map_it->is_object()) fail("{}: no \"weight_map\" object", what);
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, file] : map_it->items()) {
    if (!file.is_string()) fail("{}: weight_map entry for tensor '{}' is not a file name string", what, name);
    weight_map.emplace(name, file.get<std::string>());
  }
  if (weight_map.empty()) fail("{}: weight_map lists no tensors", what);
  return weight_map;
}

}  // namespace

Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Checkpoint Checkpoint::open(const fs::path& model_dir) {
  Checkpoint ckpt;
  ckpt.dir_ = model_dir;
  const std::string dir = model_dir.string();
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec)) fail("checkpoint {}: not a directory", dir);

  // Which files to open, and (with an index) where each stored tensor must live.
  const fs::path index_path = model_dir / kIndexFile;
  const bool have_index = fs::exists(index_path, ec);
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> file_names;
  if (have_index) {
    weight_map = read_index(index_path);
    std::set<std::string> unique;
    for (const auto& [name, file] : weight_map) {
      if (unique.insert(file).second && !fs::is_regular_file(model_dir / file, ec)) {
        fail("checkpoint {}: missing shard '{}' (listed in {} for tensor '{}')", dir, file, kIndexFile, name);
      }
    }
    file_names.assign(unique.begin(), unique.end());
  } else {
    for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
      if (entry.is_regular_file() && entry.path().extension() == ".safetensors") {
        file_names.push_back(entry.path().filename().string());
      }
    }
    if (ec) fail("checkpoint {}: cannot list the folder: {}", dir, ec.message());
    if (file_names.empty()) {
      fail("checkpoint {}: the folder holds no safetensors checkpoint (neither {} nor {} nor any *.safetensors)",
           dir, kSingleFile, kIndexFile);
    }
    std::sort(file_names.begin(), file_names.end());
  }

  // stored name -> (file index) to catch duplicates across files and cross-check the index.
  std::unordered_map<std::string, size_t> stored_in;
  std::unordered_map<std::string, std::string> canonical_from;  // canonical -> stored name
  for (size_t fi = 0; fi < file_names.size(); ++fi) {
    const std::string& file_name = file_names[fi];
    auto mf = std::make_unique<MappedFile>(model_dir / file_name);
    const std::vector<RawTensor> raw = parse_header(*mf);
    const uint8_t* data_region = mf->data() + 8 + read_u64_le(mf->data());
    const std::string file_path = mf->path().string();

    for (const RawTensor& t : raw) {
      const auto [it, inserted] = stored_in.emplace(t.stored_name, fi);
      if (!inserted) {
        fail("checkpoint {}: duplicate tensor '{}' in {} and {}", dir, t.stored_name, file_names[it->second],
             file_name);
      }
      if (have_index) {
        const auto wm = weight_map.find(t.stored_name);
        if (wm == weight_map.end()) {
          fail("{}: shard contains tensor '{}' that {} does not mention", file_path, t.stored_name, kIndexFile);
        }
        if (wm->second != file_name) {
          fail("{}: shard contains tensor '{}' that {} places in {}", file_path, t.stored_name, kIndexFile,
               wm->second);
        }
      }

      std::string canonical = canonical_tensor_name(t.stored_name);
      if (canonical.empty()) {
        ++ckpt.set_aside_count_;
        continue;
      }
      const auto [cit, fresh] = canonical_from.emplace(canonical, t.stored_name);
      if (!fresh) {
        fail("checkpoint {}: tensors '{}' and '{}' ({}) both map to '{}'", dir, cit->second, t.stored_name,
             file_name, canonical);
      }
      ckpt.by_name_.emplace(canonical, ckpt.tensors_.size());
      ckpt.tensors_.push_back(TensorInfo{
          .name = std::move(canonical),
          .stored_name = t.stored_name,
          .file = file_name,
          .dtype = t.dtype,
          .shape = t.shape,
          .data = data_region + t.begin,
          .nbytes = static_cast<size_t>(t.end - t.begin),
      });
    }
    ckpt.files_.push_back(std::move(mf));
  }

  if (have_index) {
    for (const auto& [name, file] : weight_map) {
      if (!stored_in.contains(name)) {
        fail("checkpoint {}: {} lists tensor '{}' in {}, but that shard does not contain it", dir, kIndexFile, name,
             file);
      }
    }
  }
  return ckpt;
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
  const auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& Checkpoint::get(std::string_view name) const {
  const TensorInfo* info = find(name);
  if (info == nullptr) fail("checkpoint {}: missing tensor '{}'", dir_.string(), name);
  return *info;
}

const TensorInfo& Checkpoint::get(std::string_view name, DType dtype, std::span<const int64_t> shape) const {
  const TensorInfo& info = get(name);
  if (info.dtype != dtype || !std::ranges::equal(info.shape, shape)) {
    fail("checkpoint {}: tensor '{}' in {} has dtype {} shape {}, expected {} [{}]", dir_.string(), name, info.file,
         dtype_name(info.dtype), info.shape_string(), dtype_name(dtype), fmt::join(shape, ", "));
  }
  return info;
}

uint64_t Checkpoint::file_bytes() const {
  uint64_t total = 0;
  for (const auto& f : files_) total += f->size();
  return total;
}

}  // namespace imp::model
