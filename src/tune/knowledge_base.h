#pragma once
/// The knowledge base (AOE's custom repository): one SQLite database `tune_bank.db` in the bank
/// folder, one entry per (operator signature, validators). Writes are transactions in WAL mode
/// with a busy timeout, so two tuners writing at once and a tuner killed mid-write leave a
/// consistent database.
#include <sqlite3.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace portkit::tune {

struct BankEntry {
  std::string op_key;      ///< Signature(op)
  std::string validators;  ///< Validators(...) of the machine and toolchain
  std::string op_type;
  std::string op_name;     ///< the name the operator had when it was stored (informative)
  std::string config;      ///< SearchSpace::Key of the stored strategy
  double time_us = 0;      ///< measured time of the stored strategy
  double default_us = 0;   ///< measured time of the default strategy in the same run
  std::string updated;     ///< UTC time of the last write, ISO 8601
};

enum class StoreOutcome { kAdded, kUpdated, kKept };

class KnowledgeBase {
 public:
  /// Opens (creating) `<dir>/tune_bank.db`. Errors name the path.
  static Expected<KnowledgeBase> Open(const std::filesystem::path& dir);
  KnowledgeBase(KnowledgeBase&& o) noexcept : db_(o.db_), path_(std::move(o.path_)) { o.db_ = nullptr; }
  KnowledgeBase& operator=(KnowledgeBase&&) = delete;
  ~KnowledgeBase();

  Expected<std::optional<BankEntry>> Lookup(const std::string& op_key, const std::string& validators);
  /// Stores `e` when there is no entry for its key or when it is faster than the entry; the
  /// comparison and the write are one transaction. When the entry still holds `remeasured_config`
  /// (re-measured in this run at `remeasured_us`), `e` is compared with that fresh time instead
  /// of the stored one.
  Expected<StoreOutcome> StoreIfBetter(const BankEntry& e, const std::string& remeasured_config = "",
                                       double remeasured_us = 0);
  /// All entries, sorted by op type, signature and validators.
  Expected<std::vector<BankEntry>> List();
  const std::filesystem::path& path() const { return path_; }

 private:
  KnowledgeBase() = default;
  Status Exec(const char* sql);
  Status Error(const char* what);
  sqlite3* db_ = nullptr;
  std::filesystem::path path_;
};

/// The validators of this machine and toolchain: CPU model, its SIMD flags, core count, compiler
/// version and portkit version, as `cpu=...;flags=...;cores=N;compiler=...;portkit=...`.
std::string Validators(const std::string& compiler_version, const std::string& portkit_version);

/// The bank folder: `flag` when given, else $TUNE_BANK_PATH, else $XDG_CACHE_HOME/portkit, else
/// ~/.cache/portkit.
std::filesystem::path BankDir(const std::string& flag);

/// Bank entries as JSON (`{"portkit_tune_bank": 1, "entries": [...]}`) and back; errors name
/// the file and the field.
std::string EntriesToJson(const std::vector<BankEntry>& entries);
Expected<std::vector<BankEntry>> EntriesFromJson(std::string_view json, std::string_view file);

}  // namespace portkit::tune
