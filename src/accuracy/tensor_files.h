#pragma once
/// What `portkit convert` writes: .npy (format 1.0) and .txt (numpy.savetxt of the flattened
/// tensor) files, built in pieces so big tensors stream through without being held whole, and a
/// file writer that appends and only renames into place once complete.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "accuracy/dtype.h"
#include "core/status.h"

namespace portkit::accuracy {

/// Seed naming: '.', '/', '\\', spaces (and ':') in names become '_'.
std::string SafeName(std::string s);

/// numpy descr of a dtype as written. bf16 and fp8 cannot be held by .npy: they are written as
/// float32 (`*widened` set).
const char* NpyDescr(DType t, bool* widened);

/// The .npy v1.0 header (magic, length, dict padded to 64 bytes) for a C-order array.
std::string NpyHeader(DType t, const std::vector<int64_t>& shape);

/// Appends the .npy payload of `count` little-endian elements of `t` (widened to float32 where
/// NpyDescr says so).
void AppendNpyData(DType t, const uint8_t* data, size_t count, std::string* out);

/// Appends one line per element in numpy.savetxt's default format (`%.18e`).
void AppendTxtData(DType t, const uint8_t* data, size_t count, std::string* out);

/// Writes a file in pieces to `<path>.tmp.<pid>`; Commit() fsyncs and renames it into place.
/// Destroyed without Commit(), the temporary file is removed: no half-written file is left under
/// the final name.
class StreamingFile {
 public:
  static Expected<StreamingFile> Create(const std::filesystem::path& path);
  StreamingFile(StreamingFile&& o) noexcept;
  StreamingFile& operator=(StreamingFile&&) = delete;
  StreamingFile(const StreamingFile&) = delete;
  ~StreamingFile();

  Status Append(std::string_view bytes);
  Status Commit();

 private:
  StreamingFile(std::filesystem::path path, std::filesystem::path tmp, int fd)
      : path_(std::move(path)), tmp_(std::move(tmp)), fd_(fd) {}
  std::filesystem::path path_, tmp_;
  int fd_ = -1;
};

}  // namespace portkit::accuracy
