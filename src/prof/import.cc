// `prof import`: find the traces under a path by their content and import each into the store.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include "core/atomic_file.h"
#include "core/input_files.h"
#include "prof/api.h"
#include "prof/ascend_join.h"
#include "prof/json_stream.h"
#include "prof/own_outputs.h"

namespace portkit::prof {
namespace fs = std::filesystem;
namespace {

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

/// Regular files under `path` (itself when it is a file), sorted. portkit's own outputs by their
/// place (own_outputs.h) go to `own` instead, each reported once. Links are never followed and
/// FIFOs or devices never opened (docs/safety.md): those with a trace-like name are listed in
/// `notes` (relative path, why).
std::vector<InputEntry> CandidateFiles(const fs::path& path, std::vector<std::pair<fs::path, std::string>>* notes,
                                       std::map<std::string, std::string>* own) {
  std::vector<InputEntry> out;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return {InputEntry{path, path.filename().string(), InputEntry::Kind::kFile, {}}};
  WalkOptions walk;
  for (const auto& e : WalkInputTree(path, walk)) {
    if (e.kind == InputEntry::Kind::kFile) {
      if (IsStoreFile(e.path)) continue;
      if (auto o = OwnOutputByPlace(e)) own->emplace(o->what, o->why);
      else out.push_back(e);
    } else if (e.kind == InputEntry::Kind::kOutput) {
      auto o = OwnOutputFolder(e);
      own->emplace(o.what, o.why);
    } else if ((e.kind == InputEntry::Kind::kLink || e.kind == InputEntry::Kind::kSpecial) &&
               HasTraceLikeName(e.path)) {
      notes->emplace_back(e.path, e.note);
    }
  }
  std::sort(out.begin(), out.end(), [](const InputEntry& x, const InputEntry& y) { return x.path < y.path; });
  return out;
}

constexpr std::string_view kImportMarkerPrefix = ".portkit-import.";

/// Writes the marker of this run: the traces not imported yet, one a line (atomically).
Status WriteImportMarker(const fs::path& marker, const std::vector<std::string>& pending) {
  std::string text;
  for (const auto& p : pending) text += p + "\n";
  return WriteFileAtomic(marker, text);
}

/// A 64-bit digest of the file's bytes (for telling copies apart; not cryptographic).
uint64_t FileDigest(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> buf(1 << 20);
  uint64_t h = 1469598103934665603ull;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    std::streamsize n = in.gcount();
    if (n <= 0) break;
    h = (h ^ std::hash<std::string_view>{}(std::string_view(buf.data(), static_cast<size_t>(n)))) * 1099511628211ull;
  }
  return h;
}

/// The stored traces whose files hold the same bytes as another stored trace: (copy, first).
/// Only files of equal size are read.
std::vector<std::pair<std::string, std::string>> FindDuplicates(const fs::path& folder,
                                                                const std::vector<std::string>& paths) {
  std::map<uintmax_t, std::vector<std::string>> by_size;
  for (const auto& p : paths) {
    std::error_code ec;
    uintmax_t size = fs::file_size(folder / p, ec);
    if (!ec) by_size[size].push_back(p);
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [size, group] : by_size) {
    if (group.size() < 2) continue;
    std::map<uint64_t, std::string> first;
    for (const auto& p : group) {
      auto [it, fresh] = first.emplace(FileDigest(folder / p), p);
      if (!fresh) out.emplace_back(p, it->second);
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

std::vector<UnfinishedImport> UnfinishedImports(const fs::path& folder) {
  std::vector<UnfinishedImport> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(kImportMarkerPrefix, 0) != 0 || name.find(".tmp") != std::string::npos) continue;
    if (!e.is_regular_file(ec) || e.is_symlink(ec)) continue;
    char* end = nullptr;
    long pid = std::strtol(name.c_str() + kImportMarkerPrefix.size(), &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    UnfinishedImport u;
    u.pid = pid;
    u.running = kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) u.pending.push_back(line);
    out.push_back(std::move(u));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  return out;
}

std::vector<std::string> UnfinishedImportWarnings(const fs::path& folder) {
  std::vector<std::string> out;
  for (const auto& u : UnfinishedImports(folder)) {
    std::string list;
    for (size_t i = 0; i < u.pending.size() && i < 10; ++i) list += (i ? ", " : "") + u.pending[i];
    if (u.pending.size() > 10) list += ", ... (" + std::to_string(u.pending.size()) + " in all)";
    out.push_back((u.running ? "a prof import (pid " + std::to_string(u.pid) + ") into " + folder.string() +
                                   " is still running; the profile is incomplete until it ends"
                             : "the prof import (pid " + std::to_string(u.pid) + ") into " + folder.string() +
                                   " did not finish (killed?); the profile is incomplete") +
                  (list.empty() ? "" : "; not imported: " + list) + ". Run `portkit prof import` again");
  }
  return out;
}

Status ImportReport::FirstFailure() const {
  for (const auto& t : traces)
    if (!t.status.ok()) return t.status;
  return Status::Ok();
}

namespace {

using Importers = std::vector<std::unique_ptr<Importer>>;

/// A trace found under the input, with the importer that recognised it.
struct FoundTrace {
  fs::path path;
  const Importer* importer;
};

/// What the search of the input found: the traces to import and portkit's own outputs (what,
/// why), which are never read back.
struct FoundInput {
  std::vector<FoundTrace> traces;
  std::map<std::string, std::string> own;
};

/// The importer of `file` from its first bytes `head`; null when none reads it.
const Importer* ImporterOf(const fs::path& file, const std::string& head, const Importers& importers,
                           const ImportLimits& limits) {
  if (const Importer* importer = DetectImporter(importers, head)) return importer;
  // A JSON object whose first kSniffBytes hold none of a trace's keys may still have its
  // traceEvents further on (after a long first member): look for it at the top level.
  auto first = head.find_first_not_of(" \t\r\n");
  if (head.size() >= kSniffBytes && first != std::string::npos && head[first] == '{' &&
      HasTopLevelMember(file.string(), "traceEvents", limits)) {
    for (const auto& i : importers)
      if (i->name() == "kineto") return i.get();
  }
  return nullptr;
}

/// Finds the traces under options.input by their content; report.skipped gets the files left
/// out, with why (sorted). Errors: a single file that is no trace, no trace at all.
Expected<FoundInput> FindTraces(const ImportOptions& options, const Importers& importers, bool single_file,
                                ImportReport& report) {
  FoundInput in;
  std::vector<std::pair<fs::path, std::string>> not_read;
  for (const auto& entry : CandidateFiles(options.input, &not_read, &in.own)) {
    const fs::path& file = entry.path;
    std::string head = ReadFirstBytes(file);
    if (auto o = OwnOutputByContent(entry, head); o && !single_file) {
      in.own.emplace(o->what, o->why);
      continue;
    }
    if (const Importer* importer = ImporterOf(file, head, importers, options.limits)) {
      in.traces.push_back({file, importer});
    } else if (single_file) {
      return ParseError(file.string() + ": not a trace portkit reads (it reads " + DescribeImporters(importers) + ")");
    } else if (HasTraceLikeName(file)) {
      report.skipped.emplace_back(Relative(file, report.folder), "not a trace portkit reads");
    }
  }
  // Never read back: importing them would count every event a second time.
  // (`own` is empty for a single file: a file named on the command line is imported as asked.)
  for (const auto& [what, why] : in.own) report.skipped.emplace_back(what, why);
  // lexically: fs::relative would resolve the very link being reported.
  for (const auto& [file, why] : not_read)
    report.skipped.emplace_back(file.lexically_relative(report.folder).generic_string(), why);
  std::sort(report.skipped.begin(), report.skipped.end());
  if (in.traces.empty())
    return NotFound("no trace found under " + options.input.string() + " (looked for " + DescribeImporters(importers) +
                    ")");
  return in;
}

/// Imports one trace, timed; its failure is in the result's status.
ImportedTrace ImportOne(const FoundTrace& found, Store& store, const ImportOptions& options, const fs::path& folder,
                        Progress& progress, Logger& log) {
  ImportedTrace t;
  t.path = Relative(found.path, folder);
  t.importer = std::string(found.importer->name());
  progress.Start("Import " + t.path + ".");
  auto start = std::chrono::steady_clock::now();
  auto result = found.importer->Import(found.path, t.path, store, options.limits);
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!result.ok()) {
    t.status = result.status();
    progress.Done("Import " + t.path + " failed.");
    return t;
  }
  t.result = std::move(*result);
  if (!t.result.warning.empty()) log.Warning(t.path + ": " + t.result.warning);
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.1f", t.seconds > 0 ? static_cast<double>(t.result.bytes) / 1e6 / t.seconds : 0.0);
  progress.Done("Imported " + t.path + ": " + std::to_string(t.result.events) + " events (" + rate + " MB/s).");
  return t;
}

/// An ASCEND_PROFILER_OUTPUT folder is one profile: kernel_details rows join trace_view's tasks.
/// The counts and notes of the traces involved change accordingly.
Status JoinAscend(Store& store, ImportReport& report, Logger& log) {
  std::vector<std::pair<std::string, std::string>> by_importer;
  for (const auto& t : report.traces)
    if (t.status.ok()) by_importer.emplace_back(t.path, t.importer);
  auto joins = JoinAscendSiblings(store, by_importer);
  if (!joins.ok()) return joins.status();
  for (const auto& j : *joins) {
    log.Info("Joined " + std::to_string(j.joined) + " of " + std::to_string(j.rows) + " rows of " + j.kernel_details +
             " to the device tasks of " + j.trace_view + ".");
    for (auto& t : report.traces) {
      if (t.path == j.trace_view) t.result.events += static_cast<uint64_t>(j.rows - j.joined);
      if (t.path != j.kernel_details || j.rows == 0) continue;
      t.result.events = 0;
      std::string note = std::to_string(j.joined) + " of " + std::to_string(j.rows) + " rows joined to the tasks of " +
                         j.trace_view + ", the other " + std::to_string(j.rows - j.joined) + " added to its timeline";
      t.result.warning = t.result.warning.empty() ? note : t.result.warning + "; " + note;
    }
  }
  return Status::Ok();
}

/// A folder import is the folder's profile: traces imported earlier whose files are gone leave
/// it, and so do portkit's own outputs (`own`) that an earlier portkit imported.
Status DropVanished(Store& store, const std::map<std::string, std::string>& own, ImportReport& report, Logger& log) {
  auto is_own = [&](const std::string& stored) {
    for (const auto& [what, why] : own)
      if (stored == what || (what.back() == '/' && stored.rfind(what, 0) == 0)) return true;
    return false;
  };
  std::vector<std::string> own_dropped;
  auto stored = store.TracePaths();
  if (!stored.ok()) return stored.status();
  for (const auto& p : *stored) {
    std::error_code gone_ec;
    if (!fs::exists(report.folder / p, gone_ec) && !gone_ec) report.dropped.push_back(p);
    else if (is_own(p)) own_dropped.push_back(p);
  }
  PORTKIT_RETURN_IF_ERROR(store.DropTraces(report.dropped));
  PORTKIT_RETURN_IF_ERROR(store.DropTraces(own_dropped));
  for (const auto& p : report.dropped)
    log.Info("Dropped " + p + " from the profile: imported earlier, its file is gone.");
  for (const auto& p : own_dropped)
    log.Info("Dropped " + p + " from the profile: portkit's own output, imported by an earlier portkit.");
  report.dropped.insert(report.dropped.end(), own_dropped.begin(), own_dropped.end());
  std::sort(report.dropped.begin(), report.dropped.end());
  return Status::Ok();
}

/// Stored traces holding the same bytes, each warned about.
Status FindCopies(Store& store, ImportReport& report, Logger& log) {
  auto stored = store.TracePaths();
  if (!stored.ok()) return stored.status();
  report.duplicates = FindDuplicates(report.folder, *stored);
  for (const auto& [copy, original] : report.duplicates)
    log.Warning(copy + " has the same content as " + original +
                ": both are in the profile, so its events count twice; delete one and import again");
  return Status::Ok();
}

/// Removes this run's marker, and a killed earlier run's once everything it had left has been
/// imported now.
void RemoveMarkers(const fs::path& marker, const fs::path& folder, const std::vector<UnfinishedImport>& earlier,
                   const std::set<std::string>& imported) {
  std::error_code rm_ec;
  fs::remove(marker, rm_ec);
  for (const auto& u : earlier) {
    if (u.running) continue;
    bool covered =
        std::all_of(u.pending.begin(), u.pending.end(), [&](const std::string& p) { return imported.count(p) > 0; });
    if (covered) fs::remove(folder / (std::string(kImportMarkerPrefix) + std::to_string(u.pid)), rm_ec);
  }
}

}  // namespace

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
  const bool single_file = fs::is_regular_file(options.input, ec);
  auto found = FindTraces(options, importers, single_file, report);
  if (!found.ok()) return found.status();
  for (const auto& [path, why] : report.skipped) log.Info("Skipped " + path + ": " + why + ".");
  auto store = Store::Open(report.database);
  if (!store.ok()) return store.status();
  store->SetTraceLimits(options.limits.max_events, options.limits.max_store_growth_bytes);
  // The crash marker: which traces are still to come; removed once the run ends.
  const fs::path marker = report.folder / (std::string(kImportMarkerPrefix) + std::to_string(getpid()));
  std::vector<std::string> pending;
  for (const auto& f : found->traces) pending.push_back(Relative(f.path, report.folder));
  const auto earlier = UnfinishedImports(report.folder);
  PORTKIT_RETURN_IF_ERROR(WriteImportMarker(marker, pending));
  std::set<std::string> imported;
  Progress progress(log, found->traces.size());
  for (const auto& f : found->traces) {
    ImportedTrace t = ImportOne(f, *store, options, report.folder, progress, log);
    if (t.status.ok()) imported.insert(t.path);
    report.traces.push_back(std::move(t));
    pending.erase(pending.begin());
    if (Status st = WriteImportMarker(marker, pending); !st.ok()) log.Warning(st.message());
  }
  PORTKIT_RETURN_IF_ERROR(JoinAscend(*store, report, log));
  if (!single_file) PORTKIT_RETURN_IF_ERROR(DropVanished(*store, found->own, report, log));
  PORTKIT_RETURN_IF_ERROR(FindCopies(*store, report, log));
  RemoveMarkers(marker, report.folder, earlier, imported);
  for (const auto& w : UnfinishedImportWarnings(report.folder)) log.Warning(w);
  return report;
}

}  // namespace portkit::prof
