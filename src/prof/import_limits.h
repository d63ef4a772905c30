#pragma once
/// The caps `prof import` puts on what one trace may make it hold or write (docs/safety.md,
/// Limits). Memory while importing is one event (or one top-level member, or one CSV row) plus
/// a fixed window, whatever the file; these caps stop inputs that would need more, or that are
/// built to expand (a gzip bomb), with a message naming the limit and the flag that raises it.
#include <cstdint>
#include <string>

#include "core/status.h"

namespace portkit::prof {

struct ImportLimits {
  /// The largest single event, top-level member or CSV row held in memory (`--max-object-mb`).
  uint64_t max_object_bytes = uint64_t{64} << 20;
  /// The most a compressed trace may expand, as a multiple of its size on disk, once more than
  /// kExpansionFloorBytes have come out (`--max-expansion`; 0 = no cap). Real gzip traces expand
  /// 9 to 20 times; a gzip bomb of repeated bytes about 1000 times.
  uint64_t max_expansion = 100;
  /// The most events (or kernel_details rows) one trace may store (`--max-events`; 0 = no cap).
  /// The largest real traces seen hold a few million; a generated or damaged one more.
  uint64_t max_events = 100'000'000;
  /// The most one trace's import may grow the store, in bytes (`--max-store-growth-mb`; 0 = no
  /// cap): checked as the events are written (every kGrowthCheckEvents), before the indexes,
  /// which come on top at the end (about a third of the rows' size).
  uint64_t max_store_growth_bytes = uint64_t{32} << 30;
};

/// How often (in events) TraceWriter checks the store's growth against the cap.
inline constexpr uint64_t kGrowthCheckEvents = 16384;

/// Below this many decompressed bytes the expansion cap does not apply (small files compress well).
inline constexpr uint64_t kExpansionFloorBytes = uint64_t{64} << 20;

/// Checks the bytes decompressed so far from a file of `compressed_bytes` on disk against
/// ImportLimits::max_expansion. Plain (not gzip) files pass `compressed = false`.
inline Status CheckExpansion(const std::string& path, bool compressed, uint64_t compressed_bytes,
                             uint64_t decompressed_bytes, const ImportLimits& limits) {
  if (!compressed || limits.max_expansion == 0 || decompressed_bytes <= kExpansionFloorBytes) return Status::Ok();
  if (decompressed_bytes / limits.max_expansion <= compressed_bytes) return Status::Ok();
  return InvalidArgument(path + ": over the limit: " + std::to_string(compressed_bytes) +
                         " compressed bytes expanded to more than " + std::to_string(decompressed_bytes >> 20) +
                         " MiB (over " + std::to_string(limits.max_expansion) +
                         " times; a gzip bomb?); not imported. --max-expansion raises the limit");
}

}  // namespace portkit::prof
