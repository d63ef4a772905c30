#pragma once
/// `prof analyse`: an advisor over an imported profile. Rules live one per file in this folder and
/// are listed in rules.cc; each reads the loaded profile and returns findings with severity,
/// evidence and advice.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "prof/store.h"
#include "target/target_facts.h"

namespace portkit::prof {

struct ProfEvent {
  std::string name;
  std::string kind;
  int64_t trace = 0, ts = 0, dur = 0, pid = 0, tid = 0;
  int64_t correlation = -1;  ///< links a runtime call to its device task (-1: none)
  std::string input_dims;
  int64_t end() const { return ts + dur; }
};

/// Everything the rules read, loaded once.
struct Profile {
  std::vector<ProfEvent> events;  ///< sorted by trace, pid, tid, ts
  struct Step {
    int64_t trace, start, end;
    std::string name;
  };
  std::vector<Step> steps;
  /// The warm-up: `ProfilerStep#0` of a trace that marks later steps too (collect's step 0, before
  /// the first optimizer step). Reported apart, never one of `steps`.
  std::vector<Step> warmup;
  /// The data folder the advisor's tables are read from (DataDirs::primary()).
  std::filesystem::path data_dir;
  /// The target's facts (targets/<name>/target.json; without a name, the one with "default":
  /// true): its communication kernel names and fused replacements.
  target::TargetFacts target;

  /// Loads the events of `store` and the facts of `target` (a name of the targets of `data`'s
  /// folders, $PORTKIT_DATA_DIR's among them, or a folder holding a target.json; empty: the
  /// default target of data.primary()).
  static Expected<Profile> Load(Store& store, const DataDirs& data, const std::string& target = "");
  /// Whether device kernel `name` is collective communication (nccl, rccl, AllReduce, or a name
  /// the target lists in profile.communication_kernels).
  bool IsCommunication(const std::string& name) const;
  bool IsDevice(const ProfEvent& e) const {
    return e.kind == "kernel" || e.kind == "gpu_memcpy" || e.kind == "gpu_memset";
  }
};

enum class Severity { kHigh, kMedium, kLow, kInfo };
const char* SeverityName(Severity s);

struct AdvisorFinding {
  std::string rule;
  Severity severity = Severity::kInfo;
  std::string title;
  std::string evidence;
  std::string advice;
};

class AdvisorRule {
 public:
  virtual ~AdvisorRule() = default;
  virtual std::string_view name() const = 0;
  virtual void Check(const Profile& profile, std::vector<AdvisorFinding>& out) = 0;
};

std::vector<std::unique_ptr<AdvisorRule>> MakeAdvisorRules();

/// Time split of the profile (per step when steps are marked).
struct Breakdown {
  int64_t wall = 0, compute = 0, communication = 0, memcpy = 0, device_busy = 0, host_ops = 0;
  /// Host time in runtime/driver calls that started a device task of the profile (kernel
  /// launches, copies: linked by correlation id), as a union.
  int64_t launch = 0;
  size_t steps = 0;
  size_t warmup_steps = 0;  ///< warm-up steps left out (one per trace at most)
  int64_t warmup = 0;       ///< their total span
};
Breakdown ComputeBreakdown(const Profile& p);

/// "12.345 ms" (from 1 ms up) or "45.6 us".
std::string Duration(int64_t ns);
/// "12.3%" of `whole` ("0.0%" when whole is 0).
std::string Share(int64_t part, int64_t whole);

/// Total time per name of the host operators (device = false) or the device tasks, largest
/// first (ties by name), at most `n`.
std::vector<std::pair<std::string, int64_t>> TopByTime(const Profile& p, bool device, size_t n);
/// Exclusive (self) time of every host operator (kind cpu_op): its duration less that of the
/// cpu_ops nested directly inside it on the same thread; 0 for other events. Indexed like
/// `p.events`.
std::vector<int64_t> SelfTimes(const Profile& p);
/// Whether `e` starts inside a marked step (always true when no steps are marked).
bool InSteps(const Profile& p, const ProfEvent& e);

/// One row of the host-operator table.
struct HostOpStat {
  std::string name;
  std::string input_dims;  ///< the recorded input shapes (empty when not recorded or not split)
  int64_t count = 0, self_ns = 0, total_ns = 0;
};
/// Host operators (cpu_op) per name, or per name and input shapes when `by_shape`: count, self
/// and total time; largest self time first (ties by name, shapes).
std::vector<HostOpStat> HostOpTable(const Profile& p, bool by_shape);

/// The time split rows: host operators, then (when the device was busy) device compute,
/// communication, memcpy/memset and idle.
std::vector<std::pair<std::string, int64_t>> TimeSplit(const Breakdown& b);

}  // namespace portkit::prof
