#pragma once
/// Read-only memory map of a file; empty files map to an empty view.
#include <filesystem>
#include <string_view>

#include "core/status.h"

namespace portkit {

class FileView {
 public:
  FileView() = default;
  ~FileView();
  FileView(FileView&& other) noexcept;
  FileView& operator=(FileView&& other) noexcept;
  FileView(const FileView&) = delete;
  FileView& operator=(const FileView&) = delete;

  /// Maps a regular file; a symbolic link, FIFO, device or folder is refused (OpenInputFile).
  static Expected<FileView> Open(const std::filesystem::path& path);
  std::string_view data() const { return {static_cast<const char*>(addr_), size_}; }
  size_t size() const { return size_; }
  /// Drops the whole pages of [data, data + bytes), a range of this view already read, from the
  /// process (they stay in the page cache and are read back if touched again), so streaming through
  /// a large file keeps memory use flat.
  void ReleaseRange(const void* data, size_t bytes) const;

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace portkit
