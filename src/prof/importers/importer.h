#pragma once
/// The trace importers behind one interface. Each importer is one file in this folder and one
/// line in registry.cc; `prof import` reads the first bytes of every file (decompressed when it
/// is gzip), asks each importer in registry order whether it reads that content, and hands the
/// file to the first one that does. The file name plays no part: a gzipped Ascend
/// `trace_view.json` or a renamed `kernel_details.csv` is found by what it holds.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "prof/import_limits.h"
#include "prof/store.h"

namespace portkit::prof {

/// What one import stored.
struct ImportResult {
  std::string format;    ///< kineto, legacy, ascend_pt, ascend_pt kernel_details
  uint64_t events = 0;   ///< timed events stored
  uint64_t marks = 0;    ///< metadata, counters, instants, flows kept for the timeline
  uint64_t skipped = 0;  ///< events not stored (malformed, invalid)
  uint64_t invalid = 0;  ///< of which had an out-of-range number (ts, dur, id)
  uint64_t bytes = 0;    ///< uncompressed bytes read
  bool truncated = false;
  std::string warning;                       ///< what was not imported and why
  std::map<std::string, uint64_t> per_kind;  ///< stored events by kind
};

class Importer {
 public:
  virtual ~Importer() = default;
  /// Short stable name ("kineto", "ascend_pt", ...), recorded in ImportedTrace::importer.
  virtual std::string_view name() const = 0;
  /// One line for messages: what files this importer reads.
  virtual std::string_view description() const = 0;
  /// Whether this importer reads a file that starts with `first_bytes` (at most
  /// kSniffBytes, decompressed when the file is gzip). Cheap and side-effect free.
  virtual bool Sniff(std::string_view first_bytes) const = 0;
  /// Imports the file at `path` into `store` as the trace named `display` (its path relative
  /// to the profile folder). Either the whole trace is stored or, on error, nothing is. Memory is
  /// bounded by `limits` whatever the file; going over one is an error naming it.
  virtual Expected<ImportResult> Import(const std::filesystem::path& path, const std::string& display, Store& store,
                                        const ImportLimits& limits) const = 0;
};

/// How many leading bytes Sniff sees.
inline constexpr size_t kSniffBytes = 4096;

/// Every importer, in the order they are asked (more specific formats first).
std::vector<std::unique_ptr<Importer>> MakeImporters();

/// The first `max_bytes` bytes of the file (decompressed when it is gzip); empty when it cannot
/// be read.
std::string ReadFirstBytes(const std::filesystem::path& path, size_t max_bytes = kSniffBytes);

/// The importer that reads content starting with `first_bytes`, or null.
const Importer* DetectImporter(const std::vector<std::unique_ptr<Importer>>& importers, std::string_view first_bytes);

/// One line listing what the importers read (for "no trace found" messages).
std::string DescribeImporters(const std::vector<std::unique_ptr<Importer>>& importers);

// Importer factories, one per file (listed in registry.cc).
std::unique_ptr<Importer> MakeTorchNpuTraceImporter();
std::unique_ptr<Importer> MakeKinetoTraceImporter();
std::unique_ptr<Importer> MakeLegacyTraceImporter();
std::unique_ptr<Importer> MakeKernelDetailsImporter();

}  // namespace portkit::prof
