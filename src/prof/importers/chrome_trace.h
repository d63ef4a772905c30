#pragma once
/// Importer for Chrome-trace JSON as PyTorch writes it: Kineto traces (`{"traceEvents": [...]}`,
/// CUDA/ROCm/CPU), the legacy torch profiler's bare event list, and torch_npu's trace_view.json
/// (string timestamps). Streams the file; a truncated or corrupt tail keeps what was valid.
#include <map>
#include <string>

#include "prof/store.h"

namespace portkit::prof {

struct ImportResult {
  std::string format;                       ///< kineto, legacy, torch_npu
  uint64_t events = 0;                      ///< timed events stored
  uint64_t skipped = 0;                     ///< events not stored (metadata, flows, invalid)
  uint64_t bytes = 0;                       ///< uncompressed bytes read
  bool truncated = false;
  std::string warning;                      ///< what was not imported and why
  std::map<std::string, uint64_t> per_kind; ///< stored events by kind
};

/// True when the first bytes look like a Chrome-trace JSON (plain or gzip).
bool SniffChromeTrace(const std::string& path);

Expected<ImportResult> ImportChromeTrace(const std::string& path, const std::string& display, Store& store);

/// `123.456` (µs, as Kineto writes it; also a quoted string) → 123456 ns, exactly, without
/// going through a double. False for text that is not a decimal number.
bool ParseMicrosToNanos(std::string_view text, int64_t* ns);

}  // namespace portkit::prof
