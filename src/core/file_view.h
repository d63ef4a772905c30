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

  static Expected<FileView> Open(const std::filesystem::path& path);
  std::string_view data() const { return {static_cast<const char*>(addr_), size_}; }
  size_t size() const { return size_; }

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace portkit
