#pragma once
/// portkit's own outputs inside a folder of traces. `prof import` and `prof cluster` read every
/// trace under a folder; what portkit wrote there (the cluster reports and merged timeline, an
/// exported timeline, summaries, advisor reports, diffs) is never read back as a trace: it would
/// count every event a second time. Both commands skip such files and list them with the reason.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "core/input_files.h"

namespace portkit::prof {

/// The first bytes of `prof cluster`'s merged timeline (cluster_timeline.json).
inline constexpr std::string_view kClusterTimelineHead = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"origin_ns\":";

/// One of portkit's own outputs found in a walk: `what` is the path reported (relative to the walk's
/// root; a folder ends with '/'), `why` the reason.
struct OwnOutput {
  std::string what;
  std::string why;
};

/// Whether the walked entry `e` (a regular file) is one of portkit's own outputs by where it is:
/// under a `cluster_analysis_output/` folder (at any depth; `what` is that folder), under a
/// `timeline/`, `summary/`, `analysis/` or `diff/` folder (the default outputs of `prof export`,
/// `analyse` and `diff`; `what` is that folder), or listed in its folder's `.portkit-files` ledger
/// (what portkit wrote with `-o`; `what` is the file). Reads no file but the ledger.
std::optional<OwnOutput> OwnOutputByPlace(const InputEntry& e);

/// Whether a file whose first bytes (decompressed) are `head` is a timeline portkit wrote
/// (`export timeline`, `cluster`'s cluster_timeline.json), wherever it sits and whatever its name.
std::optional<OwnOutput> OwnOutputByContent(const InputEntry& e, std::string_view head);

/// A marked output folder the walk did not enter (InputEntry::Kind::kOutput).
OwnOutput OwnOutputFolder(const InputEntry& e);

}  // namespace portkit::prof
