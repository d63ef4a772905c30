#pragma once
/// Streaming split of a trace JSON into its events without loading the whole document: a
/// Chrome/Kineto trace `{"traceEvents": [ {...}, ... ], "deviceProperties": ..., ...}` or a bare
/// event array `[ {...}, ... ]` (legacy torch profiler, Ascend PyTorch profiler trace_view.json). Plain or gzip
/// input (zlib reads both). A truncated or corrupt tail stops the split where the input stops
/// being valid; what came before is kept and the stop is reported.
#include <functional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "prof/import_limits.h"

namespace portkit::prof {

struct StreamStats {
  uint64_t bytes_read = 0;  ///< uncompressed bytes consumed
  uint64_t events = 0;      ///< complete event objects handed out
  bool truncated = false;   ///< the input ended or broke inside the document
  std::string stop_reason;  ///< why it stopped early, with the byte offset
};

/// Readable bytes that always follow an event handed to StreamCallbacks::on_event (their content
/// is unspecified): enough for simdjson to parse the event where it lies, without a padded copy.
inline constexpr size_t kEventPadding = 64;

struct StreamCallbacks {
  /// One event object, as JSON text (valid until the next call), followed in memory by at least
  /// kEventPadding readable bytes.
  std::function<void(std::string_view event)> on_event;
  /// A top-level member other than traceEvents (deviceProperties, baseTimeNanoseconds, ...),
  /// as raw JSON text (at most ImportLimits::max_object_bytes; a larger one is an error).
  std::function<void(std::string_view key, std::string_view value)> on_member;
  /// Asked before each event: true ends the split there (the reader of the events failed).
  std::function<bool()> stop;
};

/// Splits the file at `path`. Errors when the file cannot be opened or does not start like a
/// trace, and when it goes over `limits` (an event or member over max_object_bytes, a gzip file
/// expanding past max_expansion: "PATH: over the limit: ..."); damage later in the file ends the
/// split with `stats.truncated`. Memory: one event or member plus a 64 KiB piece, whatever the file.
Status SplitTraceEvents(const std::string& path, const StreamCallbacks& callbacks, StreamStats* stats,
                        const ImportLimits& limits = {});

/// Whether the JSON object in the file at `path` (plain or gzip) has a top-level member `name`,
/// wherever it comes (a Chrome trace may put `traceEvents` after any other member). Reads up to
/// that member; false for anything that is not an object, or that ends or breaks before it.
bool HasTopLevelMember(const std::string& path, std::string_view name, const ImportLimits& limits = {});

}  // namespace portkit::prof
