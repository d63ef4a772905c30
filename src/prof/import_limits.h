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
};

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
