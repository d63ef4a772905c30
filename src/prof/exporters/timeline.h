#pragma once
/// `prof export timeline`: a Chrome-trace JSON of an imported profile that Perfetto and
/// chrome://tracing load. Events that would not nest on their track are clipped (and counted);
/// timestamps are relative to the trace's first event so every value is exact in a double; kernel
/// launches are flow arrows (runtime call → kernel).
#include <string>

#include "core/status.h"
#include "prof/store.h"

namespace portkit::prof {

struct TimelineStats {
  uint64_t events = 0, clipped = 0, flows = 0;
};

/// The timeline of every trace in `store` as JSON text.
Expected<std::string> BuildTimeline(Store& store, TimelineStats* stats);

}  // namespace portkit::prof
