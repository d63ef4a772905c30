#pragma once
/// `prof export timeline`: a Chrome-trace JSON of an imported profile that Perfetto and
/// chrome://tracing load, without loss (docs/prof.md, "Timeline"):
/// - every complete event keeps its name, category, exact duration and its `args` object as the
///   trace wrote it (grid, block, shapes, correlation, stream, ...);
/// - every other event the trace held — metadata (process and thread names, sort indexes, labels),
///   counters ("C"), instants ("i"/"I"), flows ("s"/"t"/"f", e.g. fwdbwd and ac2g) — is written
///   again with only its pid (one process per trace and pid) and its ts (see below) changed;
/// - events that overlap on a track without nesting are never clipped: each goes to the first
///   sibling track where it nests ("<thread> (overlap N)", a thread of the same process), and the
///   flows that start or end at it follow it; the count of moves is reported;
/// - timestamps are relative to the trace's first timed event so every value is exact in a double.
/// Traces without flows of their own (the legacy profiler's) get a launch flow per kernel launch
/// (runtime call → kernel). Traces imported by a portkit before store schema 2 have no args and
/// no metadata; they are counted in TimelineStats::without_detail.
#include <functional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "prof/store.h"

namespace portkit::prof {

/// The first bytes of every timeline portkit writes (the `otherData` member names the writer), so
/// that `prof export timeline -o FILE` knows a file it wrote from one it did not. Timelines of
/// portkit before the member started with kTimelineHeadBefore.
inline constexpr std::string_view kTimelineHead =
    "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"portkit prof export timeline\"},\"traceEvents\":[";
inline constexpr std::string_view kTimelineHeadBefore = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";

struct TimelineStats {
  uint64_t events = 0;          ///< complete events written
  uint64_t moved = 0;           ///< of which moved to a sibling track (overlapping, not nested)
  uint64_t sibling_tracks = 0;  ///< sibling tracks made for them
  uint64_t marks = 0;           ///< metadata, counters, instants and flow events written again
  uint64_t flows = 0;           ///< launch flows made by portkit (traces without flows of their own)
  uint64_t without_detail = 0;  ///< traces imported before schema 2 (no args, no marks)
};

/// Receives the timeline piece by piece (WriteTimeline); an error ends the export.
using TimelineSink = std::function<Status(std::string_view)>;

/// Writes the timeline of every trace in `store` to `sink` in pieces of about 1 MiB as it is
/// built: the text of the events (names, args, metadata) is read from the store as each is
/// written, so memory grows with the number of events, not with their text or the output's size.
Status WriteTimeline(Store& store, const TimelineSink& sink, TimelineStats* stats);

/// The timeline of every trace in `store` as JSON text (WriteTimeline into a string).
Expected<std::string> BuildTimeline(Store& store, TimelineStats* stats);

}  // namespace portkit::prof
