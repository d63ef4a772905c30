#pragma once
/// Output files are written to a temporary name beside the target and renamed into place, so a
/// crash never leaves a half-written file that looks complete.
#include <filesystem>
#include <string_view>

#include "core/status.h"

namespace portkit {

/// Writes `content` to `path` atomically (temp file in the same folder, fsync, rename).
Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content);

/// Copies `from` to `to` atomically (temp file beside `to`, then rename); keeps the mode bits.
/// `from` must be a regular file and not a symbolic link (OpenInputFile with Links::kRefuse);
/// errors name both paths and the system's reason.
Status CopyFileAtomic(const std::filesystem::path& from, const std::filesystem::path& to);

/// Reads a whole file (a regular file only: OpenInputFile refuses FIFOs and devices without
/// blocking). Errors name the path.
Expected<std::string> ReadFile(const std::filesystem::path& path);

}  // namespace portkit
