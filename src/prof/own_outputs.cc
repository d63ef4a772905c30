// Telling portkit's own outputs from the traces of a folder (see own_outputs.h).
#include "prof/own_outputs.h"

#include <algorithm>

#include "core/output_policy.h"
#include "prof/exporters/timeline.h"

namespace portkit::prof {
namespace fs = std::filesystem;

namespace {

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

std::optional<OwnOutput> OwnOutputByPlace(const InputEntry& e) {
  // The outermost output folder is reported, once for all the files under it.
  std::optional<OwnOutput> found;
  for (fs::path dir = fs::path(e.rel).parent_path(); !dir.empty(); dir = dir.parent_path()) {
    const std::string name = dir.filename().string();
    if (name == "cluster_analysis_output")
      found =
          OwnOutput{dir.generic_string() + "/", "portkit's own output (prof cluster's reports and merged timeline)"};
    else if (name == "timeline" || name == "summary" || name == "analysis" || name == "diff")
      found = OwnOutput{dir.generic_string() + "/", "portkit's own output (prof export, analyse or diff)"};
  }
  if (found) return found;
  const std::string name = e.path.filename().string();
  if (name == kWrittenLedger) return std::nullopt;
  const auto listed = WrittenFiles(e.path.parent_path());
  if (std::find(listed.begin(), listed.end(), name) != listed.end())
    return OwnOutput{e.rel, "portkit's own output (listed in " + std::string(kWrittenLedger) + " beside it)"};
  return std::nullopt;
}

std::optional<OwnOutput> OwnOutputByContent(const InputEntry& e, std::string_view head) {
  if (StartsWith(head, kTimelineHead) || StartsWith(head, kTimelineHeadBefore))
    return OwnOutput{e.rel, "portkit's own output (a timeline written by prof export timeline)"};
  if (StartsWith(head, kClusterTimelineHead))
    return OwnOutput{e.rel, "portkit's own output (a merged timeline written by prof cluster)"};
  return std::nullopt;
}

OwnOutput OwnOutputFolder(const InputEntry& e) {
  std::string command = MarkedOutputCommand(e.path);
  return OwnOutput{e.rel + "/",
                   "portkit's own output folder" + (command.empty() ? std::string() : " (" + command + ")")};
}

}  // namespace portkit::prof
