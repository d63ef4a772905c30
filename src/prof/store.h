#pragma once
/// The profile store: one SQLite database (`portkit.db`) per profile folder. Writes go through
/// this API only (importers never touch SQL). Timestamps are integer nanoseconds.
#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <unordered_map>

#include "core/status.h"

namespace portkit::prof {

/// Categories of timed events.
enum class EventKind : uint8_t {
  kCpuOp, kUserAnnotation, kGpuAnnotation, kKernel, kMemcpy, kMemset, kRuntime, kDriver,
  kSync, kPythonFunction, kStep, kOther
};
const char* EventKindName(EventKind k);

struct Event {
  EventKind kind = EventKind::kOther;
  std::string_view name;
  std::string_view category;  ///< the trace's own `cat`
  int64_t ts_ns = 0, dur_ns = 0;
  int64_t pid = 0, tid = 0;   ///< for device events: device and stream
  int64_t correlation = -1, external_id = -1;
  // Kernel launch geometry and resources (-1 when absent).
  int64_t grid[3] = {-1, -1, -1}, block[3] = {-1, -1, -1};
  int64_t registers = -1, shared_memory = -1, bytes = -1;
  double occupancy = -1;
  std::string_view input_dims, input_types;  ///< raw JSON text when recorded
};

class Store {
 public:
  static Expected<Store> Open(const std::string& path);
  Store(Store&& o) noexcept;
  Store& operator=(Store&&) = delete;
  ~Store();

  /// Starts a trace; returns its id. All events of a trace go in one transaction.
  Expected<int64_t> BeginTrace(const std::string& path, const std::string& format);
  Status AddEvent(int64_t trace, const Event& e);
  Status AddDevice(int64_t trace, int64_t id, const std::string& name, const std::string& properties);
  Status EndTrace(int64_t trace, uint64_t events, uint64_t skipped, const std::string& warning);
  /// Removes an earlier import of the same file (re-import replaces it).
  Status ForgetTrace(const std::string& path);

  sqlite3* db() { return db_; }

 private:
  Store() = default;
  Expected<int64_t> Intern(std::string_view s);
  Status Exec(const char* sql);
  Status LinkLaunchesToOps(int64_t trace);
  Status Check(int rc, const char* what);
  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_event_ = nullptr;
  sqlite3_stmt* insert_string_ = nullptr;
  std::unordered_map<std::string, int64_t> strings_;
  std::string path_;
};

}  // namespace portkit::prof
