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
      // Kineto trace objects, and torch_npu's trace_view.json (an event array with string ts).
      if (LooksLikeTraceObject(head) || (LooksLikeEventArray(head) && HasStringTimestamp(head))) out.push_back(e.path);
      else if (skipped) skipped->emplace_back(e.rel, "not a Kineto or torch_npu trace");
    } else if (skipped && e.kind != InputEntry::Kind::kOutput) {
      skipped->emplace_back(e.rel, e.note.empty() ? "not a regular file" : e.note);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

int64_t RankFromAscendFolder(const fs::path& file, const fs::path& dir) {
  std::error_code ec;
  auto root = fs::weakly_canonical(dir, ec);
  for (fs::path d = file.parent_path(); !d.empty(); d = d.parent_path()) {
    for (const auto& e : fs::directory_iterator(d, ec)) {
      std::string name = e.path().filename().string();
      // profiler_info_<rank>.json, written by torch_npu's profiler beside ASCEND_PROFILER_OUTPUT.
      if (name.rfind("profiler_info_", 0) == 0 && name.size() > 19 && name.substr(name.size() - 5) == ".json") {
        std::string digits = name.substr(14, name.size() - 19);
        if (!digits.empty() && digits.size() < 9 && digits.find_first_not_of("0123456789") == std::string::npos)
          return std::stoll(digits);
      }
    }
    if (ec || fs::weakly_canonical(d, ec) == root || d == d.parent_path()) break;
  }
  return -1;
}

}  // namespace portkit::prof::cluster
