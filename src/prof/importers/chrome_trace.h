#pragma once
/// The Chrome-trace JSON reader shared by the Kineto, legacy and Ascend (ascend_pt) importers: streams the
/// file (plain or gzip), parses each event with simdjson and writes it to the store. A truncated
/// or corrupt tail keeps what was valid (with a warning); a file with no complete event before
/// the damage is an error.
#include <filesystem>
#include <string>
#include <string_view>

#include "prof/importers/importer.h"
#include "prof/store.h"

namespace portkit::prof {

/// Imports the trace at `path` as `format` ("kineto", "legacy": CPU ops without a category,
/// "ascend_pt"). Either the whole trace is stored or, on error, nothing is.
Expected<ImportResult> ImportChromeTrace(const std::filesystem::path& path, const std::string& display,
                                         std::string_view format, Store& store);

// Sniff helpers over the first bytes of a file.
/// `{` with a Kineto top-level key (traceEvents, schemaVersion, deviceProperties).
bool LooksLikeTraceObject(std::string_view head);
/// `[` then an event object with a "ph" key.
bool LooksLikeEventArray(std::string_view head);
/// The first "ts" value is a quoted string (the Ascend profiler writes them so).
bool HasStringTimestamp(std::string_view head);

/// `123.456` (µs, as Kineto writes it; also a quoted string) → 123456 ns, exactly, without
/// going through a double. False for text that is not a decimal number.
bool ParseMicrosToNanos(std::string_view text, int64_t* ns);

}  // namespace portkit::prof
