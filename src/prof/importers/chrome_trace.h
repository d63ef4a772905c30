#pragma once
/// The Chrome-trace JSON reader shared by the Kineto, legacy and Ascend (ascend_pt) importers: streams the
/// file (plain or gzip), parses each event with simdjson and writes it to the store. A truncated
/// or corrupt tail keeps what was valid (with a warning); a file with no complete event before
/// the damage is an error.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "prof/importers/importer.h"
#include "prof/store.h"

namespace portkit::prof {

/// Imports the trace at `path` as `format` ("kineto", "legacy": CPU ops without a category,
/// "ascend_pt"). Either the whole trace is stored or, on error, nothing is.
Expected<ImportResult> ImportChromeTrace(const std::filesystem::path& path, const std::string& display,
                                         std::string_view format, Store& store, const ImportLimits& limits = {});

// Sniff helpers over the first bytes of a file.
/// `{` with a Kineto top-level key (traceEvents, schemaVersion, deviceProperties).
bool LooksLikeTraceObject(std::string_view head);
/// `[` then an event object with a "ph" key.
bool LooksLikeEventArray(std::string_view head);
/// The first "ts" value is a quoted string (the Ascend profiler writes them so).
bool HasStringTimestamp(std::string_view head);

/// Numbers from a trace are range-checked where they are read (docs/safety.md, "Numbers from
/// input"): an event whose timestamp, duration or id is outside these bounds is left out and
/// counted in ImportResult::invalid, never wrapped. The bounds keep every later sum and difference
/// in int64: |ts| ≤ 4e18 ns (the year 2096 as ns since 1970), 0 ≤ dur ≤ 1e14 ns (about 28 hours
/// for one event), and the durations of one trace add up to at most 2^56 ns (about 2.3 years).
inline constexpr int64_t kMaxTimestampNs = 4'000'000'000'000'000'000;
inline constexpr int64_t kMaxDurationNs = 100'000'000'000'000;
inline constexpr int64_t kMaxTraceDurationSumNs = int64_t{1} << 56;

/// `123.456` (µs, as Kineto writes it; also a quoted string) → 123456 ns, exactly, without
/// going through a double. False for text that is not a decimal number, and for a number whose
/// magnitude is above kMaxTimestampNs ns (then `*out_of_range` is set when given).
bool ParseMicrosToNanos(std::string_view text, int64_t* ns, bool* out_of_range = nullptr);

/// Whether an event's timestamp and duration (ns) are inside the bounds above.
inline bool TimesInRange(int64_t ts_ns, int64_t dur_ns) {
  return ts_ns >= -kMaxTimestampNs && ts_ns <= kMaxTimestampNs && dur_ns >= 0 && dur_ns <= kMaxDurationNs;
}

}  // namespace portkit::prof
