#pragma once
/// The one overwrite policy of every command (docs/safety.md "Outputs"): a command never replaces
/// a file it did not create, unless the user says --force.
///
/// A file a command writes is recorded in the ledger kWrittenLedger of the folder it is in (one
/// file name a line). A later run of any portkit command may replace a file the ledger lists; an
/// existing file the ledger does not list (a user's `train.py`, somebody else's report) is refused
/// before any work: "PATH already exists and portkit did not write it; give another name, or
/// --force to replace it". Folder outputs that portkit creates as a whole keep their own marker
/// (kOutputMarker in core/input_files.h); the ledger is for files written into a folder the user
/// chose, which stays an ordinary folder (walks still enter it).
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace portkit {

/// The hidden file beside the outputs of a command that lists the files portkit wrote there.
inline constexpr std::string_view kWrittenLedger = ".portkit-files";

/// Whether `file` may be written: it does not exist, or the ledger of its folder lists it, or
/// `force`. Links and things that are not regular files are refused even with `force`.
/// `option` names the flag in messages ("-o", "--output").
Status CheckReplaceable(const std::filesystem::path& file, std::string_view option, bool force);

/// CheckReplaceable for each of `names` (plain file names) inside `folder`; the first refusal is
/// returned. A folder that does not exist yet passes.
Status CheckReplaceableIn(const std::filesystem::path& folder, const std::vector<std::string>& names,
                          std::string_view option, bool force);

/// Adds `names` (plain file names inside `folder`) to `folder`'s ledger, atomically.
Status RecordWritten(const std::filesystem::path& folder, const std::vector<std::string>& names);

/// RecordWritten for one file path (its folder's ledger, its name).
Status RecordWrittenFile(const std::filesystem::path& file);

/// The policy for many files written into one folder (a conversion's thousands of tensors): the
/// ledger is read once, each name checked with CheckReplaceable's rule, and the names written are
/// added to the ledger by Commit().
class FolderOutputs {
 public:
  FolderOutputs(std::filesystem::path folder, std::string_view option, bool force);
  /// Whether `name` (a plain file name inside the folder) may be written.
  Status Check(const std::string& name) const;
  /// Remembers `name` as written (for Commit).
  void Written(const std::string& name) { written_.push_back(name); }
  /// Adds the names written to the folder's ledger.
  Status Commit() const;

 private:
  std::filesystem::path folder_;
  std::string option_;
  bool force_;
  std::vector<std::string> listed_;  // sorted
  std::vector<std::string> written_;
};

/// The names `folder`'s ledger lists (plain names only; anything with a folder separator, "." or
/// ".." is ignored).
std::vector<std::string> WrittenFiles(const std::filesystem::path& folder);

}  // namespace portkit
