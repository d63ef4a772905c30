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
  std::filesystem::path data_dir;
  /// The default target's facts (data/targets/*/target.json with "default": true): its
  /// communication kernel names and fused replacements.
  target::TargetFacts target;

  /// Loads the events of `store` and the default target of `data_dir`.
  static Expected<Profile> Load(Store& store, const std::filesystem::path& data_dir);
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
  size_t steps = 0;
};
Breakdown ComputeBreakdown(const Profile& p);

/// The advisor report as text and as a self-contained HTML page.
std::string AdvisorText(const Profile& p, const Breakdown& b, const std::vector<AdvisorFinding>& findings);
std::string AdvisorHtml(const Profile& p, const Breakdown& b, const std::vector<AdvisorFinding>& findings);

}  // namespace portkit::prof
