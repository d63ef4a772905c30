#include "tune/knowledge_base.h"

#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "core/input_files.h"
#include "core/json_writer.h"
#include "tune/builder.h"
#include "tune/operators/operator.h"

#ifndef PORTKIT_VERSION_STRING
#define PORTKIT_VERSION_STRING "0.0.0"
#endif

namespace portkit::tune {
namespace fs = std::filesystem;
namespace {

constexpr char kCreateSql[] = R"SQL(
CREATE TABLE entries (
  op_key TEXT NOT NULL,
  validators TEXT NOT NULL,
  op_type TEXT NOT NULL,
  op_name TEXT NOT NULL,
  config TEXT NOT NULL,
  time_us REAL NOT NULL,
  default_us REAL NOT NULL,
  updated TEXT NOT NULL,
  measured_here INTEGER NOT NULL DEFAULT 1,
  PRIMARY KEY (op_key, validators)
);
)SQL";

// The table of version 1 (and of banks written before schema versions): no measured_here.
constexpr char kCreateSqlV1[] = R"SQL(
CREATE TABLE entries (
  op_key TEXT NOT NULL,
  validators TEXT NOT NULL,
  op_type TEXT NOT NULL,
  op_name TEXT NOT NULL,
  config TEXT NOT NULL,
  time_us REAL NOT NULL,
  default_us REAL NOT NULL,
  updated TEXT NOT NULL,
  PRIMARY KEY (op_key, validators)
);
)SQL";

// Version 1 -> 2: entries written before the flag were stored by tuning runs or imports alike;
// they are taken as measured (the import of version 1 already refused to replace faster ones).
constexpr char kMigrateTo2[] = "ALTER TABLE entries ADD COLUMN measured_here INTEGER NOT NULL DEFAULT 1;";

constexpr char kRemedy[] =
    "give another --tune-bank folder, or move the file away and tune again (`portkit tune bank export` of the "
    "portkit that wrote it keeps its entries for `portkit tune bank import`)";

const sql::Schema& BankSchema() {
  static const sql::Schema kSchema{"tuning bank", kBankSchemaVersion, kCreateSql, {kMigrateTo2}, kRemedy};
  return kSchema;
}

/// The columns Row() reads, in its order.
constexpr char kEntryColumns[] =
    "SELECT op_key, validators, op_type, op_name, config, time_us, default_us, updated, measured_here FROM entries";
// A version-1 bank read as it is (read-only): every entry measured.
constexpr char kEntryColumnsV1[] =
    "SELECT op_key, validators, op_type, op_name, config, time_us, default_us, updated, 1 FROM entries";

/// Why a stored time cannot be shown or used ("" when it can): not a number in
/// (0, kMaxPlausibleUs] µs. The lower, per-operator bound is CheckEntry's.
std::string TimeOutOfRange(const char* name, double t) {
  if (std::isfinite(t) && t > 0 && t <= kMaxPlausibleUs) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %g is out of range (a time in microseconds, above 0 and at most %g)", name, t,
                kMaxPlausibleUs);
  return buf;
}

std::string UtcNow() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

BankEntry Row(const sql::Statement& s) {
  BankEntry e;
  e.op_key = std::string(s.Text(0));
  e.validators = std::string(s.Text(1));
  e.op_type = std::string(s.Text(2));
  e.op_name = std::string(s.Text(3));
  e.config = std::string(s.Text(4));
  e.time_us = s.Double(5);
  e.default_us = s.Double(6);
  e.updated = std::string(s.Text(7));
  e.measured_here = s.Int(8) != 0;
  return e;
}

// SQLite reports a lock it could not wait for (a new database switched to WAL by two tuners at
// once) as "database is locked" without consulting the busy handler; such steps are retried.
bool IsLocked(const Status& st) {
  return !st.ok() && (st.message().find("database is locked") != std::string::npos ||
                      st.message().find("database table is locked") != std::string::npos);
}

template <typename Step>
Status Retrying(Step step) {
  for (int attempt = 0;; ++attempt) {
    Status st = step();
    if (!IsLocked(st) || attempt >= 3000) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string JoinFlags(const std::vector<std::string>& flags) {
  std::string out;
  for (const auto& f : flags) out += (out.empty() ? "" : " ") + f;
  return out;
}

// The bank before schema versions (user_version 0) had today's table, keyed by validators that
// ended in `;portkit=VERSION` instead of the compile flags and the template hash. An entry
// written by this very version was measured with this version's templates and the default flags
// (the only ones portkit used), so it is re-keyed; entries of other versions keep their old key,
// which no lookup matches (they stay listed and exportable).
Status MigrateUnversioned(sql::Database& db) {
  sql::Transaction tx(db);
  PORTKIT_RETURN_IF_ERROR(tx.status());
  auto version = db.UserVersion();
  if (!version.ok()) return version.status();
  if (*version != 0) return tx.Commit();  // another tuner migrated it meanwhile
  auto has_entries = db.Prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'entries'");
  if (!has_entries.ok()) return has_entries.status();
  auto row = has_entries->Step();
  if (!row.ok()) return row.status();
  if (!*row || has_entries->Int(0) == 0) return tx.Commit();  // not a bank: EnsureSchema refuses it
  auto select = db.Prepare("SELECT rowid, validators, op_type FROM entries");
  if (!select.ok()) return select.status();
  const std::string suffix = std::string(";portkit=") + PORTKIT_VERSION_STRING;
  const std::string flags = JoinFlags(BuildOptions{}.flags);
  std::vector<std::pair<int64_t, std::string>> rekeyed;
  while (true) {
    auto more = select->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    std::string validators(select->Text(1));
    std::string hash = KernelTemplateHash(select->Text(2));
    if (hash.empty() || validators.size() < suffix.size() ||
        validators.compare(validators.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    validators.resize(validators.size() - suffix.size());
    rekeyed.emplace_back(select->Int(0), validators + ";cxxflags=" + flags + ";template=" + hash);
  }
  auto update = db.Prepare("UPDATE OR REPLACE entries SET validators = ?1 WHERE rowid = ?2");
  if (!update.ok()) return update.status();
  for (const auto& [rowid, validators] : rekeyed)
    PORTKIT_RETURN_IF_ERROR(update->Bind(1, validators).Bind(2, rowid).Run());
  PORTKIT_RETURN_IF_ERROR(db.SetUserVersion(1));  // EnsureSchema takes it on to the current version
  return tx.Commit();
}

// A bank written before schema versions, read as it is (read-only listing): the same table.
// Whether the file is a bank written before schema versions (a table `entries`, user_version 0);
// such a bank must be exactly that layout (kCreateSqlV1), or it is refused. The version, the
// table and the layout are read in one snapshot: read in separate statements they can straddle
// another tuner's commit that creates a new bank (version 0 from before it, the current table
// from after), which made a bank being created look like a foreign one.
Expected<bool> IsUnversionedBank(sql::Database& db) {
  sql::Transaction snapshot(db, sql::Transaction::Mode::kDeferred);
  PORTKIT_RETURN_IF_ERROR(snapshot.status());
  auto version = db.UserVersion();
  if (!version.ok()) return version.status();
  if (*version != 0) return false;
  auto st = db.Prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'entries'");
  if (!st.ok()) return st.status();
  auto row = st->Step();
  if (!row.ok()) return row.status();
  const bool legacy = *row && st->Int(0) > 0;
  // Nothing but a bank's own table is read or migrated (a trigger on it would run on the re-keying).
  if (legacy) PORTKIT_RETURN_IF_ERROR(sql::CheckOwnSchema(db, "tuning bank", kCreateSqlV1, kRemedy));
  PORTKIT_RETURN_IF_ERROR(snapshot.Commit());
  return legacy;
}

// A file that exists but does not start with SQLite's header is refused before SQLite sees it:
// SQLite would take a short file of any content for an empty database and write over it.
Status CheckIsSqlite(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) == 0) return Status::Ok();
  char header[16] = {};
  if (auto probe = OpenInputFile(path); !probe.ok()) return probe.status();
  std::ifstream in(path, std::ios::binary);
  in.read(header, sizeof header);
  if (in.gcount() == sizeof header &&
      std::string_view(header, sizeof header) == std::string_view("SQLite format 3\0", 16))
    return Status::Ok();
  return ParseError(path.string() + ": not a tuning bank (not a SQLite database); " + kRemedy);
}

}  // namespace

fs::path BankDatabasePath(const fs::path& location) {
  std::error_code ec;
  if (fs::is_regular_file(location, ec)) return location;
  return location / "tune_bank.db";
}

Expected<KnowledgeBase> KnowledgeBase::Open(const fs::path& location, BankAccess access, int64_t max_string_bytes) {
  fs::path path = BankDatabasePath(location);
  std::error_code ec;
  // A bank has no view and no trigger: none stored in the file is ever run, whatever it holds.
  sql::OpenOptions options;
  options.max_value_bytes = max_string_bytes;
  options.limit_remedy = "--max-string-mb raises the limit";
  options.run_stored_views = false;
  options.run_stored_triggers = false;
  if (access == BankAccess::kReadOnly) {
    if (!fs::exists(path, ec))
      return NotFound("no tuning bank at " + path.string() +
                      " (it is created by the first `portkit tune` run; "
                      "give the folder with --tune-bank)");
    PORTKIT_RETURN_IF_ERROR(CheckIsSqlite(path));
    options.read_only = true;
    auto db = sql::Database::Open(path, options);
    if (!db.ok() && (db.status().message().find("readonly database") != std::string::npos ||
                     db.status().message().find("cannot be opened") != std::string::npos)) {
      // A WAL bank in a folder this process cannot write (SQLite cannot create its -shm file):
      // read it as an immutable file.
      options.immutable = true;
      auto frozen = sql::Database::Open(path, options);
      if (frozen.ok()) db = std::move(frozen);
    }
    if (!db.ok()) return db.status();
    KnowledgeBase kb(std::move(*db), path);
    kb.writable_ = false;
    auto legacy = IsUnversionedBank(kb.db_);
    if (!legacy.ok()) return legacy.status();
    if (*legacy) {
      kb.schema_version_ = 0;
      return kb;
    }
    // A version-1 bank is read as it is (its entries count as measured); it is migrated the
    // first time it is opened for writing.
    auto version = kb.db_.UserVersion();
    if (!version.ok()) return version.status();
    if (*version == 1) {
      PORTKIT_RETURN_IF_ERROR(sql::CheckOwnSchema(kb.db_, "tuning bank", kCreateSqlV1, kRemedy));
      kb.schema_version_ = 1;
      return kb;
    }
    PORTKIT_RETURN_IF_ERROR(sql::EnsureSchema(kb.db_, BankSchema()));
    return kb;
  }
  fs::create_directories(path.parent_path().empty() ? fs::path(".") : path.parent_path(), ec);
  if (ec) return IoError("cannot create the tune bank folder " + path.parent_path().string() + ": " + ec.message());
  PORTKIT_RETURN_IF_ERROR(CheckIsSqlite(path));
  auto db = sql::Database::Open(path, options);
  if (!db.ok()) return db.status();
  KnowledgeBase kb(std::move(*db), path);
  // WAL keeps readers going during a write and makes a killed writer's partial transaction
  // invisible; the busy timeout makes a second tuner wait for the writer instead of failing.
  PORTKIT_RETURN_IF_ERROR(Retrying([&] { return kb.db_.Exec("PRAGMA journal_mode=WAL"); }));
  PORTKIT_RETURN_IF_ERROR(Retrying([&] { return kb.db_.Exec("PRAGMA synchronous=NORMAL"); }));
  PORTKIT_RETURN_IF_ERROR(Retrying([&] {
    auto legacy = IsUnversionedBank(kb.db_);
    if (!legacy.ok()) return legacy.status();
    if (!*legacy) return Status::Ok();
    return MigrateUnversioned(kb.db_);
  }));
  // Of two tuners creating one new bank, one creates it and the other finds it made
  // (EnsureSchema looks again under the write lock).
  PORTKIT_RETURN_IF_ERROR(Retrying([&] { return sql::EnsureSchema(kb.db_, BankSchema()); }));
  auto check = kb.db_.Prepare("PRAGMA quick_check");
  if (check.ok()) {
    auto row = check->Step();
    if (row.ok() && *row && check->Text(0) != "ok")
      return ParseError(path.string() + ": the tune bank is damaged (" + std::string(check->Text(0)) + "); " + kRemedy);
  }
  return kb;
}

Expected<std::optional<BankEntry>> KnowledgeBase::Lookup(const std::string& op_key, const std::string& validators) {
  auto st = db_.Prepare(std::string(schema_version_ < 2 ? kEntryColumnsV1 : kEntryColumns) +
                        " WHERE op_key = ?1 AND validators = ?2");
  if (!st.ok()) return st.status();
  st->Bind(1, op_key).Bind(2, validators);
  auto row = st->Step();
  if (!row.ok()) return row.status();
  if (*row) return std::optional<BankEntry>(Row(*st));
  return std::optional<BankEntry>();
}

Expected<StoreOutcome> KnowledgeBase::StoreIfBetter(const BankEntry& e, const std::string& remeasured_config,
                                                    double remeasured_us) {
  // BEGIN IMMEDIATE takes the write lock before reading, so the compare-and-replace of two
  // concurrent tuners is serialised (the busy timeout makes the second one wait). The
  // transaction rolls back on every early return; a failed COMMIT is rolled back too.
  sql::Transaction tx(db_, sql::Transaction::Mode::kImmediate);
  PORTKIT_RETURN_IF_ERROR(tx.status());
  auto existing = Lookup(e.op_key, e.validators);
  if (!existing.ok()) return existing.status();
  if (!writable_) return IoError(path_.string() + ": the tuning bank was opened read-only");
  StoreOutcome outcome = StoreOutcome::kAdded;
  if (existing->has_value()) {
    const BankEntry& old = **existing;
    bool remeasured = !remeasured_config.empty() && old.config == remeasured_config;
    double incumbent = remeasured ? remeasured_us : old.time_us;
    bool replace = e.time_us < incumbent;
    // An imported time never beats a measured entry; a measured one beats an imported entry
    // that was not re-measured here (its time is not this machine's).
    if (!e.measured_here && old.measured_here) replace = false;
    else if (e.measured_here && !old.measured_here && !remeasured) replace = true;
    if (!replace) {
      PORTKIT_RETURN_IF_ERROR(tx.Commit());
      return StoreOutcome::kKept;
    }
    outcome = StoreOutcome::kUpdated;
  }
  auto st = db_.Prepare(
      "INSERT OR REPLACE INTO entries (op_key, validators, op_type, op_name, config, time_us, default_us, updated, "
      "measured_here) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  if (!st.ok()) return st.status();
  st->Bind(1, e.op_key).Bind(2, e.validators).Bind(3, e.op_type).Bind(4, e.op_name).Bind(5, e.config);
  st->Bind(6, e.time_us).Bind(7, e.default_us).Bind(8, e.updated.empty() ? UtcNow() : e.updated);
  st->Bind(9, static_cast<int64_t>(e.measured_here ? 1 : 0));
  PORTKIT_RETURN_IF_ERROR(st->Run());
  PORTKIT_RETURN_IF_ERROR(tx.Commit());
  return outcome;
}

Expected<bool> KnowledgeBase::RemoveIfStill(const std::string& op_key, const std::string& validators,
                                            const std::string& config) {
  if (!writable_) return IoError(path_.string() + ": the tuning bank was opened read-only");
  sql::Transaction tx(db_, sql::Transaction::Mode::kImmediate);
  PORTKIT_RETURN_IF_ERROR(tx.status());
  auto st = db_.Prepare("DELETE FROM entries WHERE op_key = ?1 AND validators = ?2 AND config = ?3");
  if (!st.ok()) return st.status();
  st->Bind(1, op_key).Bind(2, validators).Bind(3, config);
  PORTKIT_RETURN_IF_ERROR(st->Run());
  auto changes = db_.Prepare("SELECT changes()");
  if (!changes.ok()) return changes.status();
  auto row = changes->Step();
  if (!row.ok()) return row.status();
  bool removed = *row && changes->Int(0) > 0;
  PORTKIT_RETURN_IF_ERROR(tx.Commit());
  return removed;
}

Expected<std::vector<BankEntry>> KnowledgeBase::List(std::vector<std::string>* left_out) {
  // The rowids first (numbers only), then each entry on its own: an entry whose string is over
  // the limit fails only its own read (SQLite refuses it before loading it), and is left out.
  std::vector<int64_t> rowids;
  {
    auto ids = db_.Prepare("SELECT rowid FROM entries");
    if (!ids.ok()) return ids.status();
    while (true) {
      auto row = ids->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      rowids.push_back(ids->Int(0));
    }
  }
  auto st = db_.Prepare(std::string(schema_version_ < 2 ? kEntryColumnsV1 : kEntryColumns) + " WHERE rowid = ?1");
  if (!st.ok()) return st.status();
  std::vector<BankEntry> out;
  auto leave_out = [&](int64_t rowid, const std::string& why) {
    if (left_out) left_out->push_back(path_.string() + ": entry " + std::to_string(rowid) + " left out: " + why);
  };
  for (int64_t rowid : rowids) {
    st->Reset();
    st->Bind(1, rowid);
    auto row = st->Step();
    if (!row.ok()) {
      if (row.status().code() != ErrorCode::kInvalidArgument) return row.status();
      // Over the limit: the message says which limit and the flag that raises it.
      const std::string& m = row.status().message();
      size_t at = m.find("over the limit");
      leave_out(rowid, at == std::string::npos ? m : m.substr(at));
      continue;
    }
    if (!*row) continue;
    BankEntry e = Row(*st);
    std::string why = TimeOutOfRange("time_us", e.time_us);
    if (why.empty()) why = TimeOutOfRange("default_us", e.default_us);
    if (!why.empty()) {
      leave_out(rowid, "op_key '" + e.op_key + "': " + why);
      continue;
    }
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const BankEntry& a, const BankEntry& b) {
    return std::tie(a.op_type, a.op_key, a.validators) < std::tie(b.op_type, b.op_key, b.validators);
  });
  return out;
}

std::string CheckEntry(const BankEntry& e, double flops) {
  OpDesc probe;
  probe.name = "probe";
  probe.type = e.op_type;
  if (e.op_type == "MatMul") {
    probe.layout = "ND";
    probe.inputs = {{8, 8}, {8, 8}};
  } else if (e.op_type == "Conv2D") {
    probe.layout = "NCHW";
    probe.inputs = {{1, 1, 3, 3}, {1, 1, 1, 1}};
  }
  auto op = MakeOperator(probe);
  if (!op.ok()) return "operator type '" + e.op_type + "' has no tunable kernel";
  if (e.op_key.rfind(e.op_type + "|", 0) != 0) return "op_key '" + e.op_key + "' is not of type " + e.op_type;
  int cores = 0;
  if (size_t at = e.validators.find("cores="); at != std::string::npos)
    cores = std::atoi(e.validators.c_str() + at + 6);
  if (cores < 1 || cores > 4096) return "validators name no core count (cores=N)";
  SearchSpace space = (*op)->Space(cores);
  auto config = space.Parse(e.config);
  if (!config.ok()) return "config '" + e.config + "': " + config.status().message();
  if (std::string why = space.Check(*config); !why.empty()) return "config '" + e.config + "' is not valid: " + why;
  if (space.Key(*config) != e.config) return "config '" + e.config + "' is not in canonical form";
  for (auto [name, t] : {std::pair<const char*, double>{"time_us", e.time_us}, {"default_us", e.default_us}}) {
    char buf[160];
    if (!std::isfinite(t) || !(t > 0)) {
      std::snprintf(buf, sizeof buf, "%s %g is not a time", name, t);
      return buf;
    }
    if (std::string why = TimeOutOfRange(name, t); !why.empty()) return why;
    double floor_us = std::max(kMinPlausibleUs, flops > 0 ? flops / (kMaxPlausibleFlopsPerCore * cores) * 1e6 : 0.0);
    if (t < floor_us) {
      std::snprintf(buf, sizeof buf, "%s %g is implausible (below %.3g us for this operator on %d cores)", name, t,
                    floor_us, cores);
      return buf;
    }
  }
  return "";
}

std::string CpuDescription() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown", flags;
  while (std::getline(in, line)) {
    auto value = [&] { return line.substr(line.find(':') + 2 > line.size() ? line.size() : line.find(':') + 2); };
    if (model == "unknown" && line.rfind("model name", 0) == 0) model = value();
    if (flags.empty() && line.rfind("flags", 0) == 0) {
      // Only the SIMD features that change generated code (-march=native) are part of the key.
      std::istringstream words(value());
      std::set<std::string> simd;
      std::string w;
      while (words >> w)
        if (w.rfind("avx", 0) == 0 || w.rfind("sse", 0) == 0 || w == "fma" || w.rfind("amx", 0) == 0) simd.insert(w);
      for (const auto& s : simd) flags += (flags.empty() ? "" : " ") + s;
    }
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return "cpu=" + model + ";flags=" + flags + ";cores=" + std::to_string(cores);
}

std::string MachineValidators(const std::string& compiler_version, const std::vector<std::string>& compile_flags) {
  return CpuDescription() + ";compiler=" + compiler_version + ";cxxflags=" + JoinFlags(compile_flags);
}

std::string BankValidators(std::string_view machine, std::string_view template_hash) {
  std::string out(machine);
  // Recordings made while the key held the portkit version end in `;portkit=VERSION`.
  if (size_t at = out.find(";portkit="); at != std::string::npos) {
    size_t end = out.find(';', at + 1);
    out.erase(at, end == std::string::npos ? std::string::npos : end - at);
  }
  return out + ";template=" + std::string(template_hash);
}

fs::path BankDir(const std::string& flag) {
  if (!flag.empty()) return fs::path(flag);
  if (const char* env = std::getenv("TUNE_BANK_PATH"); env && *env) return fs::path(env);
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "portkit";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "portkit";
  return fs::path(".portkit_cache");
}
std::string EntriesToJson(const std::vector<BankEntry>& entries) {
  JsonWriter w;
  w.BeginObject().Key("portkit_tune_bank").Int(1).Key("entries").BeginArray();
  for (const auto& e : entries) {
    w.BeginObject()
        .Key("op_key")
        .String(e.op_key)
        .Key("validators")
        .String(e.validators)
        .Key("op_type")
        .String(e.op_type)
        .Key("op_name")
        .String(e.op_name)
        .Key("config")
        .String(e.config)
        .Key("time_us")
        .Double(e.time_us)
        .Key("default_us")
        .Double(e.default_us)
        .Key("updated")
        .String(e.updated)
        .Key("measured_here")
        .Bool(e.measured_here)
        .EndObject();
  }
  w.EndArray().EndObject();
  return w.str() + "\n";
}

Expected<std::vector<BankEntry>> EntriesFromJson(std::string_view json, std::string_view file) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(simdjson::padded_string(json)).get(root)) return ParseError(std::string(file) + ": not valid JSON");
  simdjson::dom::array arr;
  if (root["entries"].get_array().get(arr)) return ParseError(std::string(file) + ": entries: missing or not an array");
  std::vector<BankEntry> out;
  size_t i = 0;
  for (auto item : arr) {
    std::string where = std::string(file) + ": entries[" + std::to_string(i++) + "].";
    BankEntry e;
    for (auto [name, dst] : {std::pair<const char*, std::string*>{"op_key", &e.op_key},
                             {"validators", &e.validators},
                             {"op_type", &e.op_type},
                             {"op_name", &e.op_name},
                             {"config", &e.config},
                             {"updated", &e.updated}}) {
      std::string_view s;
      if (item[name].get_string().get(s)) return ParseError(where + name + ": missing or not a string");
      // The bank's own read limit: an entry the bank could not list is not imported either.
      if (s.size() > static_cast<size_t>(kDefaultMaxBankStringBytes))
        return ParseError(where + name + ": over the limit: a string of " + std::to_string(s.size() >> 20) +
                          " MiB, longer than a bank entry holds (" + std::to_string(kDefaultMaxBankStringBytes >> 20) +
                          " MiB); not imported");
      *dst = std::string(s);
    }
    for (auto [name, dst] : {std::pair<const char*, double*>{"time_us", &e.time_us}, {"default_us", &e.default_us}}) {
      if (item[name].get_double().get(*dst) || !(*dst > 0) || !std::isfinite(*dst))
        return ParseError(where + name + ": expected a number > 0");
    }
    e.measured_here = false;  // whatever the file says: its times were not measured on this machine
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace portkit::tune
