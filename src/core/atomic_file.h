#pragma once
/// Output files are written to a temporary name beside the target and renamed into place, so a
/// crash never leaves a half-written file that looks complete.
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace portkit {

/// Writes `content` to `path` atomically (temp file in the same folder, fsync, rename).
Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content);

/// Copies `from` to `to` atomically (temp file beside `to`, then rename); keeps the mode bits.
/// `from` must be a regular file and not a symbolic link (OpenInputFile with Links::kRefuse);
/// errors name both paths and the system's reason.
Status CopyFileAtomic(const std::filesystem::path& from, const std::filesystem::path& to);

/// Removes the temporaries `<name>.tmp.<pid>` in `dir` (not below it) whose process no longer
/// exists: what a portkit run killed mid-write left behind. A live process's are kept. Returns the
/// names removed (sorted).
std::vector<std::string> RemoveStaleTemporaries(const std::filesystem::path& dir);

/// RemoveStaleTemporaries in `root` and every folder below it (links not followed): what a
/// killed copy of a project left. Returns the paths removed, relative to `root` (sorted).
std::vector<std::string> RemoveStaleTemporariesBelow(const std::filesystem::path& root);

/// A set of output files that appear together or not at all (docs/safety.md, Report sets). Add()
/// writes each file to `<name>.tmp.<pid>` in `dir` (synced); Publish() removes the set's
/// completion marker, renames every file into place, then writes the marker (`marker`, one
/// `name size` line per file) last. A crash before the marker is written leaves no marker: the
/// set is incomplete, however many files were already renamed. Destroyed unpublished, the
/// temporaries are removed. Stale temporaries of killed earlier runs are removed on creation.
class ReportSet {
 public:
  ReportSet(std::filesystem::path dir, std::string marker);
  ~ReportSet();
  ReportSet(const ReportSet&) = delete;
  ReportSet& operator=(const ReportSet&) = delete;

  Status Add(const std::string& name, std::string_view content);
  /// Receives one piece of a streamed file (AddStreamed); an error ends the file.
  using Sink = std::function<Status(std::string_view)>;
  /// Like Add, with the content written piece by piece as `produce` hands it to the sink (a large
  /// report need not be held whole in memory); an error from `produce` or from writing is returned
  /// and the temporary removed.
  Status AddStreamed(const std::string& name, const std::function<Status(const Sink&)>& produce);
  Status Publish();

 private:
  std::filesystem::path dir_;
  std::string marker_;
  std::vector<std::pair<std::string, uint64_t>> files_;  ///< name, size
  std::vector<std::filesystem::path> staged_;            ///< temporaries not yet renamed
};

/// Like WriteFileAtomic, with the content written piece by piece as `produce` hands it to the
/// sink (a large output need not be held whole in memory); an error from `produce` or from writing
/// is returned, the temporary removed and `path` left as it was.
Status WriteFileAtomicStreamed(const std::filesystem::path& path,
                               const std::function<Status(const ReportSet::Sink&)>& produce);

/// Reads a whole file (a regular file only: OpenInputFile refuses FIFOs and devices without
/// blocking). Errors name the path.
Expected<std::string> ReadFile(const std::filesystem::path& path);

}  // namespace portkit
