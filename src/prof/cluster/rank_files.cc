// Finding the per-rank traces of a folder: every regular file whose content starts like a Kineto
// trace object (plain or gzip); links are never followed and portkit's own outputs are skipped.
#include <algorithm>
#include <map>

#include "core/input_files.h"
#include "prof/cluster/cluster.h"
#include "prof/importers/chrome_trace.h"
#include "prof/importers/importer.h"
#include "prof/own_outputs.h"

namespace portkit::prof::cluster {
namespace fs = std::filesystem;

namespace {

bool LooksLikeRankFileName(const std::string& rel) {
  auto ends = [&](std::string_view s) {
    return rel.size() >= s.size() && rel.compare(rel.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".json") || ends(".json.gz");
}

}  // namespace

Expected<std::vector<fs::path>> FindRankFiles(const fs::path& dir,
                                              std::vector<std::pair<std::string, std::string>>* skipped) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return NotFound(dir.string() + " does not exist");
  if (!fs::is_directory(dir, ec))
    return InvalidArgument(dir.string() + " is not a folder; give the folder that holds one trace per rank");
  std::vector<fs::path> out;
  std::map<std::string, std::string> own;  // portkit's outputs, each folder reported once
  for (const auto& e : WalkInputTree(dir)) {
    if (e.kind == InputEntry::Kind::kFile) {
      if (auto o = OwnOutputByPlace(e)) {
        // The default output folder is this command's own: expected there, not worth a note.
        if (o->what != std::string(kClusterOutputFolder) + "/") own.emplace(o->what, o->why);
        continue;
      }
      std::string head = ReadFirstBytes(e.path);
      if (auto o = OwnOutputByContent(e, head)) {
        own.emplace(o->what, o->why);
        continue;
      }
      // Kineto trace objects; event arrays: torch_npu's trace_view.json (string ts) and the
      // legacy profiler's per-rank traces (torch builds without Kineto). An empty file is a rank
      // file that is broken: it is read, and reported as such, rather than ignored.
      if (LooksLikeTraceObject(head) || LooksLikeEventArray(head) || (head.empty() && LooksLikeRankFileName(e.rel)))
        out.push_back(e.path);
      else if (skipped) skipped->emplace_back(e.rel, "not a Kineto, legacy torch or torch_npu trace");
    } else if (e.kind == InputEntry::Kind::kOutput) {
      auto o = OwnOutputFolder(e);
      own.emplace(o.what, o.why);
    } else if (skipped) {
      skipped->emplace_back(e.rel, e.note.empty() ? "not a regular file" : e.note);
    }
  }
  if (skipped)
    for (const auto& [what, why] : own) skipped->emplace_back(what, why);
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
