#include "core/output_policy.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "core/atomic_file.h"

namespace portkit {
namespace fs = std::filesystem;

namespace {

bool IsPlainName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

fs::path FolderOf(const fs::path& file) {
  fs::path parent = file.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

}  // namespace

std::vector<std::string> WrittenFiles(const fs::path& folder) {
  std::vector<std::string> names;
  struct stat st {};
  fs::path ledger = folder / std::string(kWrittenLedger);
  // Only a regular file is read (a link or FIFO planted as the ledger is ignored: nothing listed).
  if (::lstat(ledger.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) return names;
  Expected<std::string> text = ReadFile(ledger);
  if (!text.ok()) return names;
  size_t start = 0;
  const std::string& s = *text;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    std::string line = s.substr(start, end - start);
    if (IsPlainName(line)) names.push_back(line);
    start = end + 1;
  }
  return names;
}

namespace {

// The rule of CheckReplaceable with the ledger's names given (`listed` sorted).
Status CheckAgainst(const fs::path& file, std::string_view option, bool force, const std::vector<std::string>& listed) {
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0) return Status::Ok();  // nothing there
  std::string what = std::string(option) + " " + file.string();
  if (S_ISLNK(st.st_mode))
    return InvalidArgument(what + " is a symbolic link; portkit never writes through a link: give another name");
  if (S_ISDIR(st.st_mode)) return InvalidArgument(what + " is a folder; give a file name");
  if (!S_ISREG(st.st_mode)) return InvalidArgument(what + " is not a regular file; give another name");
  if (force || std::binary_search(listed.begin(), listed.end(), file.filename().string())) return Status::Ok();
  return InvalidArgument(what +
                         " already exists and portkit did not write it; give another name, or --force to replace it");
}

std::vector<std::string> SortedWrittenFiles(const fs::path& folder) {
  std::vector<std::string> listed = WrittenFiles(folder);
  std::sort(listed.begin(), listed.end());
  return listed;
}

}  // namespace

Status CheckReplaceable(const fs::path& file, std::string_view option, bool force) {
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0) return Status::Ok();
  return CheckAgainst(file, option, force, force ? std::vector<std::string>{} : SortedWrittenFiles(FolderOf(file)));
}

FolderOutputs::FolderOutputs(fs::path folder, std::string_view option, bool force)
    : folder_(std::move(folder)), option_(option), force_(force), listed_(SortedWrittenFiles(folder_)) {}

Status FolderOutputs::Check(const std::string& name) const {
  return CheckAgainst(folder_ / name, option_, force_, listed_);
}

Status FolderOutputs::Commit() const {
  if (written_.empty()) return Status::Ok();
  return RecordWritten(folder_, written_);
}

Status CheckReplaceableIn(const fs::path& folder, const std::vector<std::string>& names, std::string_view option,
                          bool force) {
  for (const std::string& name : names) PORTKIT_RETURN_IF_ERROR(CheckReplaceable(folder / name, option, force));
  return Status::Ok();
}

Status RecordWritten(const fs::path& folder, const std::vector<std::string>& names) {
  std::vector<std::string> listed = WrittenFiles(folder);
  std::set<std::string> all(listed.begin(), listed.end());
  size_t before = all.size();
  for (const std::string& n : names)
    if (IsPlainName(n)) all.insert(n);
  if (all.size() == before && fs::exists(folder / std::string(kWrittenLedger))) return Status::Ok();
  std::string text;
  for (const std::string& n : all) text += n + "\n";
  return WriteFileAtomic(folder / std::string(kWrittenLedger), text);
}

Status RecordWrittenFile(const fs::path& file) { return RecordWritten(FolderOf(file), {file.filename().string()}); }

}  // namespace portkit
