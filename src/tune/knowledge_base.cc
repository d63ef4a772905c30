#include "tune/knowledge_base.h"

#include <simdjson.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "core/json_writer.h"

namespace portkit::tune {
namespace fs = std::filesystem;
namespace {

const char kSchema[] = R"SQL(
CREATE TABLE IF NOT EXISTS entries (
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

std::string UtcNow() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string Text(sqlite3_stmt* s, int col) {
  const unsigned char* t = sqlite3_column_text(s, col);
  return t ? reinterpret_cast<const char*>(t) : "";
}

BankEntry Row(sqlite3_stmt* s) {
  BankEntry e;
  e.op_key = Text(s, 0);
  e.validators = Text(s, 1);
  e.op_type = Text(s, 2);
  e.op_name = Text(s, 3);
  e.config = Text(s, 4);
  e.time_us = sqlite3_column_double(s, 5);
  e.default_us = sqlite3_column_double(s, 6);
  e.updated = Text(s, 7);
  return e;
}

struct Stmt {
  sqlite3_stmt* s = nullptr;
  ~Stmt() { sqlite3_finalize(s); }
};

}  // namespace

KnowledgeBase::~KnowledgeBase() {
  if (db_) sqlite3_close(db_);
}

Status KnowledgeBase::Error(const char* what) {
  return IoError(path_.string() + ": " + what + ": " + sqlite3_errmsg(db_));
}

Status KnowledgeBase::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string m = path_.string() + ": " + (err ? err : "sqlite error");
    sqlite3_free(err);
    return IoError(m);
  }
  return Status::Ok();
}

Expected<KnowledgeBase> KnowledgeBase::Open(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError("cannot create the tune bank folder " + dir.string() + ": " + ec.message());
  KnowledgeBase kb;
  kb.path_ = dir / "tune_bank.db";
  if (sqlite3_open_v2(kb.path_.c_str(), &kb.db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    Status st = IoError("cannot open the tune bank " + kb.path_.string() + ": " +
                        (kb.db_ ? sqlite3_errmsg(kb.db_) : "out of memory"));
    return st;
  }
  // A second tuner waits for the writer instead of failing; WAL keeps readers going during a
  // write and makes a killed writer's partial transaction invisible.
  sqlite3_busy_timeout(kb.db_, 30000);
  // Two tuners creating the same bank at once: switching a new database to WAL and creating the
  // schema can fail with SQLITE_BUSY without the busy handler being consulted, so these
  // statements are retried (up to ~30 s) instead of failing the run.
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", kSchema}) {
    for (int attempt = 0;; ++attempt) {
      int rc = sqlite3_exec(kb.db_, sql, nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) break;
      if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || attempt >= 3000)
        return IoError(kb.path_.string() + ": " + sqlite3_errmsg(kb.db_));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  char* err = nullptr;
  sqlite3_stmt* check = nullptr;
  if (sqlite3_prepare_v2(kb.db_, "PRAGMA quick_check", -1, &check, nullptr) == SQLITE_OK &&
      sqlite3_step(check) == SQLITE_ROW) {
    std::string result = Text(check, 0);
    sqlite3_finalize(check);
    if (result != "ok") return IoError(kb.path_.string() + ": the tune bank is damaged (" + result + ")");
  } else {
    sqlite3_finalize(check);
  }
  sqlite3_free(err);
  return kb;
}

/// The columns Row() reads, in its order.
constexpr char kEntryColumns[] =
    "SELECT op_key, validators, op_type, op_name, config, time_us, default_us, updated FROM entries";

Expected<std::optional<BankEntry>> KnowledgeBase::Lookup(const std::string& op_key, const std::string& validators) {
  Stmt st;
  if (sqlite3_prepare_v2(db_,
                         (std::string(kEntryColumns) + " WHERE op_key = ?1 AND validators = ?2").c_str(),
                         -1, &st.s, nullptr) != SQLITE_OK)
    return Error("lookup");
  sqlite3_bind_text(st.s, 1, op_key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 2, validators.c_str(), -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(st.s);
  if (rc == SQLITE_ROW) return std::optional<BankEntry>(Row(st.s));
  if (rc == SQLITE_DONE) return std::optional<BankEntry>();
  return Error("lookup");
}

Expected<StoreOutcome> KnowledgeBase::StoreIfBetter(const BankEntry& e, const std::string& remeasured_config,
                                                   double remeasured_us) {
  // BEGIN IMMEDIATE takes the write lock before reading, so the compare-and-replace of two
  // concurrent tuners is serialised (the busy timeout makes the second one wait).
  PORTKIT_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto rollback = [&](Status st) {
    (void)Exec("ROLLBACK");
    return st;
  };
  auto existing = Lookup(e.op_key, e.validators);
  if (!existing.ok()) return rollback(existing.status());
  StoreOutcome outcome = StoreOutcome::kAdded;
  if (existing->has_value()) {
    double incumbent = (*existing)->time_us;
    if (!remeasured_config.empty() && (*existing)->config == remeasured_config) incumbent = remeasured_us;
    if (!(e.time_us < incumbent)) {
      if (Status c = Exec("COMMIT"); !c.ok()) return rollback(c);
      return StoreOutcome::kKept;
    }
    outcome = StoreOutcome::kUpdated;
  }
  Stmt st;
  if (sqlite3_prepare_v2(db_,
                         "INSERT OR REPLACE INTO entries (op_key, validators, op_type, op_name, config, time_us, "
                         "default_us, updated) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                         -1, &st.s, nullptr) != SQLITE_OK)
    return rollback(Error("store"));
  std::string updated = e.updated.empty() ? UtcNow() : e.updated;
  sqlite3_bind_text(st.s, 1, e.op_key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 2, e.validators.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 3, e.op_type.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 4, e.op_name.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 5, e.config.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_double(st.s, 6, e.time_us);
  sqlite3_bind_double(st.s, 7, e.default_us);
  sqlite3_bind_text(st.s, 8, updated.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(st.s) != SQLITE_DONE) return rollback(Error("store"));
  // A failed COMMIT (SQLITE_BUSY, disk full) leaves the transaction open: roll it back so that
  // the connection is usable and the write lock released.
  if (Status c = Exec("COMMIT"); !c.ok()) return rollback(c);
  return outcome;
}

Expected<std::vector<BankEntry>> KnowledgeBase::List() {
  Stmt st;
  if (sqlite3_prepare_v2(db_,
                         (std::string(kEntryColumns) + " ORDER BY op_type, op_key, validators").c_str(),
                         -1, &st.s, nullptr) != SQLITE_OK)
    return Error("list");
  std::vector<BankEntry> out;
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) out.push_back(Row(st.s));
  if (rc != SQLITE_DONE) return Error("list");
  return out;
}

std::string Validators(const std::string& compiler_version, const std::string& portkit_version) {
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
  return "cpu=" + model + ";flags=" + flags + ";cores=" + std::to_string(cores) + ";compiler=" + compiler_version +
         ";portkit=" + portkit_version;
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
        .Key("op_key").String(e.op_key)
        .Key("validators").String(e.validators)
        .Key("op_type").String(e.op_type)
        .Key("op_name").String(e.op_name)
        .Key("config").String(e.config)
        .Key("time_us").Double(e.time_us)
        .Key("default_us").Double(e.default_us)
        .Key("updated").String(e.updated)
        .EndObject();
  }
  w.EndArray().EndObject();
  return w.str() + "\n";
}

Expected<std::vector<BankEntry>> EntriesFromJson(std::string_view json, std::string_view file) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(simdjson::padded_string(json)).get(root))
    return ParseError(std::string(file) + ": not valid JSON");
  simdjson::dom::array arr;
  if (root["entries"].get_array().get(arr)) return ParseError(std::string(file) + ": entries: missing or not an array");
  std::vector<BankEntry> out;
  size_t i = 0;
  for (auto item : arr) {
    std::string where = std::string(file) + ": entries[" + std::to_string(i++) + "].";
    BankEntry e;
    for (auto [name, dst] : {std::pair<const char*, std::string*>{"op_key", &e.op_key}, {"validators", &e.validators},
                             {"op_type", &e.op_type}, {"op_name", &e.op_name}, {"config", &e.config},
                             {"updated", &e.updated}}) {
      std::string_view s;
      if (item[name].get_string().get(s)) return ParseError(where + name + ": missing or not a string");
      *dst = std::string(s);
    }
    for (auto [name, dst] : {std::pair<const char*, double*>{"time_us", &e.time_us}, {"default_us", &e.default_us}}) {
      if (item[name].get_double().get(*dst) || !(*dst > 0)) return ParseError(where + name + ": expected a number > 0");
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace portkit::tune
