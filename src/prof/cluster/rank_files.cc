// Finding the per-rank traces of a folder: every regular file whose content starts like a Kineto
// trace object (plain or gzip); links are never followed and portkit's own outputs are skipped.
#include <algorithm>

#include "core/input_files.h"
#include "prof/cluster/cluster.h"
#include "prof/importers/chrome_trace.h"
#include "prof/importers/importer.h"

namespace portkit::prof::cluster {
namespace fs = std::filesystem;

Expected<std::vector<fs::path>> FindRankFiles(const fs::path& dir,
                                              std::vector<std::pair<std::string, std::string>>* skipped) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return NotFound(dir.string() + " does not exist");
  if (!fs::is_directory(dir, ec))
    return InvalidArgument(dir.string() + " is not a folder; give the folder that holds one trace per rank");
  std::vector<fs::path> out;
  for (const auto& e : WalkInputTree(dir)) {
    if (e.kind == InputEntry::Kind::kFile) {
      bool in_output = false;
      for (fs::path d = fs::path(e.rel).parent_path(); !d.empty(); d = d.parent_path())
        in_output |= d.filename() == kClusterOutputFolder;
      if (in_output) continue;
      std::string head = ReadFirstBytes(e.path);
      if (LooksLikeTraceObject(head)) out.push_back(e.path);
      else if (skipped) skipped->emplace_back(e.rel, "not a Kineto trace");
    } else if (skipped && e.kind != InputEntry::Kind::kOutput) {
      skipped->emplace_back(e.rel, e.note.empty() ? "not a regular file" : e.note);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace portkit::prof::cluster
