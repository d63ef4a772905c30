#pragma once
// Helpers of the fuzz targets that read several files at once: the input is cut into pieces at
// each "\n----8<----\n" (a seed is readable: one file after another), each written to its own
// file in a folder private to this process.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace portkit::fuzz {

inline std::vector<std::string_view> SplitPieces(const uint8_t* data, size_t size, size_t max_pieces) {
  static constexpr std::string_view kCut = "\n----8<----\n";
  std::string_view all(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> pieces;
  while (pieces.size() + 1 < max_pieces) {
    size_t at = all.find(kCut);
    if (at == std::string_view::npos) break;
    pieces.push_back(all.substr(0, at));
    all.remove_prefix(at + kCut.size());
  }
  pieces.push_back(all);
  return pieces;
}

inline bool WriteBytes(const std::filesystem::path& file, std::string_view bytes) {
  FILE* f = std::fopen(file.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

/// A fresh, empty folder for this input (removed and created again on each call).
inline std::filesystem::path FreshFolder(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("portkit_" + name + "_" + std::to_string(getpid()));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  return dir;
}

}  // namespace portkit::fuzz
