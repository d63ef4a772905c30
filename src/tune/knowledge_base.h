#pragma once
/// The knowledge base (AOE's custom repository): one SQLite database, `tune_bank.db` in the bank
/// folder, one entry per (operator signature, validators). The validators are what determines a
/// kernel's behaviour: the CPU (model, SIMD features, core count), the compiler and its version,
/// the compile flags and a hash of the operator's kernel template; never the portkit version, so
/// an upgrade that leaves the kernels alone keeps every tuned entry.
///
/// The database carries a schema version (`PRAGMA user_version`, kBankSchemaVersion). A bank
/// written before versions existed is migrated when opened for writing; a newer or unknown one is
/// refused with a message saying what to do. Writes are transactions in WAL mode with a busy
/// timeout, so two tuners writing at once and a tuner killed mid-write leave a consistent
/// database.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/sqlite.h"
#include "core/status.h"

namespace portkit::tune {

/// The schema this portkit reads and writes.
/// 2 added `measured_here` (1: measured on this machine by a tuning run; 0: imported).
constexpr int kBankSchemaVersion = 2;

struct BankEntry {
  std::string op_key;      ///< Signature(op)
  std::string validators;  ///< BankValidators(...) of the machine, toolchain and kernel template
  std::string op_type;
  std::string op_name;    ///< the name the operator had when it was stored (informative)
  std::string config;     ///< SearchSpace::Key of the stored strategy
  double time_us = 0;     ///< measured time of the stored strategy
  double default_us = 0;  ///< measured time of the default strategy in the same run
  std::string updated;    ///< UTC time of the last write, ISO 8601
  /// Measured on this machine by a tuning run (true), or imported from a file (false): an
  /// imported time never replaces a measured entry and is re-measured by REPEAT_TUNE.
  bool measured_here = true;
};

/// Why a stored entry cannot be used for the operator `op_type` with `flops` per call on a
/// machine of `cores` cores ("" when it can): its configuration must parse and lie in the
/// operator's search space, its times must be finite, > 0 and plausible (not faster than
/// kMaxPlausibleFlopsPerCore per core, nor below kMinPlausibleUs). `flops` <= 0: not checked.
constexpr double kMaxPlausibleFlopsPerCore = 1e12;
constexpr double kMinPlausibleUs = 0.01;
/// The longest time an entry may hold: one hour per call (no tuned kernel call takes longer; a
/// bank that says 1e308 was not written by a tuning run).
constexpr double kMaxPlausibleUs = 3.6e9;
/// The longest string a bank entry may hold when read (`--max-string-mb`): signatures, validators
/// and configurations are a few hundred bytes; SQLite refuses a longer value before loading it.
constexpr int64_t kDefaultMaxBankStringBytes = int64_t{1} << 20;
std::string CheckEntry(const BankEntry& e, double flops);

enum class StoreOutcome { kAdded, kUpdated, kKept };

enum class BankAccess {
  kReadWrite,  ///< created when missing, migrated when older
  kReadOnly,   ///< must exist; never changed (listing, export)
};

class KnowledgeBase {
 public:
  /// Opens the bank at `location`: a folder (its `tune_bank.db`) or an existing database file.
  /// kReadWrite creates the folder and the database when missing and migrates a bank written
  /// before schema versions; kReadOnly needs an existing bank of this schema (or one written
  /// before schema versions, whose entries are read as they are). Errors name the path:
  /// kNotFound (no bank, read-only), kParse (not a SQLite database, or damaged), kUnsupported
  /// (another schema, with what to do), kIo.
  ///
  /// Before anything is read or written the file's schema must be exactly a bank's (one table
  /// `entries` with its columns and key; no view, no trigger, nothing else: kUnsupported naming
  /// the object otherwise). Stored views and triggers are never run. A string longer than
  /// `max_string_bytes` is never loaded (List leaves its entry out; other reads fail with "over
  /// the limit").
  static Expected<KnowledgeBase> Open(const std::filesystem::path& location, BankAccess access = BankAccess::kReadWrite,
                                      int64_t max_string_bytes = kDefaultMaxBankStringBytes);

  Expected<std::optional<BankEntry>> Lookup(const std::string& op_key, const std::string& validators);
  /// Stores `e` when there is no entry for its key or when it is faster than the entry; the
  /// comparison and the write are one transaction. When the entry still holds `remeasured_config`
  /// (re-measured in this run at `remeasured_us`), `e` is compared with that fresh time instead
  /// of the stored one.
  ///
  /// Measured and imported entries (BankEntry::measured_here): an imported `e` never replaces a
  /// measured entry; a measured `e` replaces an imported entry that was not re-measured. A
  /// `remeasured_us` of +inf replaces the entry whatever its time (an entry found unusable).
  Expected<StoreOutcome> StoreIfBetter(const BankEntry& e, const std::string& remeasured_config = "",
                                       double remeasured_us = 0);
  /// Whether the database can be written by this process (false for a read-only file or folder,
  /// or a bank opened kReadOnly).
  bool writable() const { return writable_; }
  /// Removes the entry of (op_key, validators) if it still holds `config` (an entry found unusable
  /// and not replaced); true when one was removed.
  Expected<bool> RemoveIfStill(const std::string& op_key, const std::string& validators, const std::string& config);
  /// All entries, sorted by op type, signature and validators. An entry that cannot be used as
  /// data is left out, with one line in `*left_out` saying which and why: a string over the
  /// limit, a time that is not a number in (0, kMaxPlausibleUs] µs. Any other error ends the list.
  Expected<std::vector<BankEntry>> List(std::vector<std::string>* left_out = nullptr);
  const std::filesystem::path& path() const { return path_; }
  /// The schema version found on open (0: a bank written before schema versions, read-only).
  int schema_version() const { return schema_version_; }

 private:
  KnowledgeBase(sql::Database db, std::filesystem::path path) : db_(std::move(db)), path_(std::move(path)) {}
  sql::Database db_;
  std::filesystem::path path_;
  int schema_version_ = kBankSchemaVersion;
  bool writable_ = true;
};

/// The database file of a bank location: `location` itself when it is an existing file, else
/// `location/tune_bank.db`.
std::filesystem::path BankDatabasePath(const std::filesystem::path& location);

/// This machine's CPU as the key sees it: `cpu=<model>;flags=<SIMD features>;cores=N` (the
/// candidates are built with -march=native and THREADS is bounded by the core count).
std::string CpuDescription();

/// The validators of this machine and toolchain: CpuDescription() plus the compiler's version
/// and the compile flags, `cpu=...;flags=...;cores=N;compiler=...;cxxflags=...`. The landscape
/// header records this string.
std::string MachineValidators(const std::string& compiler_version, const std::vector<std::string>& compile_flags);

/// The bank key's validators of one operator: `machine` (MachineValidators, or a recording's)
/// with `;template=<hash>` of the operator type's kernel template (KernelTemplateHash). A
/// `;portkit=VERSION` field of a recording made before the key left the version out is dropped.
std::string BankValidators(std::string_view machine, std::string_view template_hash);

/// The bank folder: `flag` when given, else $TUNE_BANK_PATH, else $XDG_CACHE_HOME/portkit, else
/// ~/.cache/portkit.
std::filesystem::path BankDir(const std::string& flag);

/// Bank entries as JSON (`{"portkit_tune_bank": 1, "entries": [...]}`) and back; errors name
/// the file and the field. Entries read back are marked not measured here (imported).
std::string EntriesToJson(const std::vector<BankEntry>& entries);
Expected<std::vector<BankEntry>> EntriesFromJson(std::string_view json, std::string_view file);

}  // namespace portkit::tune
