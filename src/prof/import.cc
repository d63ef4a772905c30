// `prof import`: find the traces under a path by their content and import each into the store.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/input_files.h"
#include "prof/api.h"

namespace portkit::prof {
namespace fs = std::filesystem;
namespace {

/// Folders holding portkit's own outputs inside a profile folder (never imported again).
bool IsOutputFolder(const fs::path& p) {
  std::string name = p.filename().string();
  return name == "timeline" || name == "summary" || name == "analysis" || name == "diff";
}

bool IsStoreFile(const fs::path& p) {
  std::string name = p.filename().string();
  return name.rfind(kStoreFileName, 0) == 0;  // portkit.db, portkit.db-wal, -shm, -journal
}

/// Names a user would expect to be imported: a note says why such a file was not.
bool HasTraceLikeName(const fs::path& p) {
  std::string name = p.filename().string();
  auto ends = [&](std::string_view s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".json") || ends(".gz") || ends(".csv");
}

/// Regular files under `path` (itself when it is a file), sorted; portkit's outputs skipped.
/// Links are never followed and FIFOs or devices never opened (docs/safety.md): those with a
/// trace-like name are listed in `notes` (relative path, why).
std::vector<fs::path> CandidateFiles(const fs::path& path, std::vector<std::pair<fs::path, std::string>>* notes) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return {path};
  WalkOptions walk;
  for (const auto& e : WalkInputTree(path, walk)) {
    if (e.kind == InputEntry::Kind::kFile) {
      bool in_output = false;
      for (fs::path dir = fs::path(e.rel).parent_path(); !dir.empty(); dir = dir.parent_path())
        in_output |= IsOutputFolder(dir);
      if (!in_output && !IsStoreFile(e.path)) out.push_back(e.path);
    } else if ((e.kind == InputEntry::Kind::kLink || e.kind == InputEntry::Kind::kSpecial) && HasTraceLikeName(e.path)) {
      notes->emplace_back(e.path, e.note);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Relative(const fs::path& p, const fs::path& folder) {
  std::error_code ec;
  std::string rel = fs::relative(p, folder, ec).string();
  return ec || rel.empty() ? p.filename().string() : rel;
}

}  // namespace

fs::path ProfileFolder(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return path;
  fs::path parent = path.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

fs::path StorePath(const fs::path& path) { return ProfileFolder(path) / kStoreFileName; }

Status ImportReport::FirstFailure() const {
  for (const auto& t : traces)
    if (!t.status.ok()) return t.status;
  return Status::Ok();
}

Expected<ImportReport> RunImport(const ImportOptions& options, Context& ctx) {
  Logger& log = ctx.logger;
  std::error_code ec;
  if (!fs::exists(options.input, ec))
    return NotFound(options.input.string() +
                    " does not exist; give a PROF_<timestamp> folder, a folder of traces or a trace file");
  ImportReport report;
  report.folder = ProfileFolder(options.input);
  report.database = report.folder / kStoreFileName;
  const auto importers = MakeImporters();
  struct Found {
    fs::path path;
    const Importer* importer;
  };
  std::vector<Found> found;
  bool single_file = fs::is_regular_file(options.input, ec);
  std::vector<std::pair<fs::path, std::string>> not_read;
  for (const auto& file : CandidateFiles(options.input, &not_read)) {
    const Importer* importer = DetectImporter(importers, ReadFirstBytes(file));
    if (importer) {
      found.push_back({file, importer});
    } else if (single_file) {
      return ParseError(file.string() + ": not a trace portkit reads (it reads " + DescribeImporters(importers) +
                        ")");
    } else if (HasTraceLikeName(file)) {
      report.skipped.emplace_back(Relative(file, report.folder), "not a trace portkit reads");
    }
  }
  // lexically: fs::relative would resolve the very link being reported.
  for (const auto& [file, why] : not_read)
    report.skipped.emplace_back(file.lexically_relative(report.folder).generic_string(), why);
  std::sort(report.skipped.begin(), report.skipped.end());
  if (found.empty())
    return NotFound("no trace found under " + options.input.string() + " (looked for " +
                    DescribeImporters(importers) + ")");
  for (const auto& [path, why] : report.skipped) log.Info("Skipped " + path + ": " + why + ".");
  auto store = Store::Open(report.database);
  if (!store.ok()) return store.status();
  Progress progress(log, found.size());
  for (const auto& [file, importer] : found) {
    ImportedTrace t;
    t.path = Relative(file, report.folder);
    t.importer = std::string(importer->name());
    progress.Start("Import " + t.path + ".");
    auto start = std::chrono::steady_clock::now();
    auto result = importer->Import(file, t.path, *store, options.limits);
    t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!result.ok()) {
      t.status = result.status();
      progress.Done("Import " + t.path + " failed.");
    } else {
      t.result = std::move(*result);
      if (!t.result.warning.empty()) log.Warning(t.path + ": " + t.result.warning);
      char rate[32];
      std::snprintf(rate, sizeof rate, "%.1f",
                    t.seconds > 0 ? static_cast<double>(t.result.bytes) / 1e6 / t.seconds : 0.0);
      progress.Done("Imported " + t.path + ": " + std::to_string(t.result.events) + " events (" + rate + " MB/s).");
    }
    report.traces.push_back(std::move(t));
  }
  return report;
}

}  // namespace portkit::prof
