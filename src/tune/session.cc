#include "tune/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace portkit::tune {
namespace {

uint64_t HashString(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

Status RunFailed(const std::string& why) { return Status(ErrorCode::kInternal, "run failed: " + why); }

std::string Us(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f us", us);
  return buf;
}

}  // namespace

uint64_t OperatorSeed(uint64_t seed, std::string_view signature) { return seed ^ HashString(signature); }

const char* RepoStatusName(RepoStatus s) {
  switch (s) {
    case RepoStatus::kAdd: return "add";
    case RepoStatus::kHit: return "hit";
    case RepoStatus::kUpdate: return "update";
    case RepoStatus::kReserved: return "reserved";
    case RepoStatus::kUnsatisfied: return "unsatisfied";
  }
  return "unknown";
}

namespace {

/// Where an operator stands after a pass: kNext goes on to the next pass; kDone ends the operator
/// here (it is listed untuned, or it was a hit).
enum class Pass { kNext, kDone };

/// One operator in the works: what each pass finds and hands on to the next.
struct OpWork {
  explicit OpWork(const OpDesc& d) : desc(d), sig(Signature(d)), label(d.name + " (" + d.type + ")") {}
  const OpDesc& desc;
  std::string sig, label;
  std::unique_ptr<TunableOperator> op;
  SearchSpace space;
  Config default_config;
  const std::map<std::string, LandscapePoint>* points = nullptr;  ///< a replay's recorded points
  std::string op_validators;                                      ///< the bank key of its type
  std::optional<BankEntry> found;                                 ///< a usable bank entry
  std::string unusable_config;                                    ///< the config of an unusable one
  std::optional<Config> stored;  ///< the found entry's configuration, when inside this run's space
  std::unique_ptr<Evaluator> evaluator;
  TuneOutcome out;
  double best_us = 0, default_us = 0;  ///< from the interleaved comparison when there was one
  bool better_than_default = false;
  OpResult r;
};

/// A session over a model's operators, pass by pass: capture (the toolchain, or the recording
/// replayed) → per operator: space → bank lookup → measure → choose and save.
class Session {
 public:
  Session(const OpList& list, const SessionOptions& options, KnowledgeBase& bank, const Landscape* replay,
          Landscape* record, Logger& logger)
      : list_(list),
        options_(options),
        bank_(bank),
        replay_(replay),
        record_(record),
        logger_(logger),
        start_(std::chrono::steady_clock::now()),
        progress_(logger, list.ops.size()),
        hardware_threads_(options.hardware_threads),
        fixes_(options.fixes) {}

  Expected<SessionResult> Run() {
    // Validate the strategy and its options once, before any work.
    if (auto probe = MakeStrategy(options_.strategy, options_.strategy_options); !probe.ok()) return probe.status();
    result_.name = list_.name.empty() ? "portkit_tune" : list_.name;
    result_.strategy = options_.strategy;
    result_.untuned = list_.untuned;
    result_.bank_path = bank_.path().string();
    PORTKIT_RETURN_IF_ERROR(Capture());
    result_.validators = validators_;
    PORTKIT_RETURN_IF_ERROR(ReportProgress());
    for (const auto& desc : list_.ops) {
      PORTKIT_RETURN_IF_ERROR(TuneOne(desc));
      result_.seconds = Seconds();
      PORTKIT_RETURN_IF_ERROR(ReportProgress());
    }
    result_.seconds = Seconds();
    return std::move(result_);
  }

 private:
  double Seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

  Status ReportProgress() {
    if (options_.on_progress)
      if (Status st = options_.on_progress(result_); !st.ok()) return RunFailed(st.message());
    return Status::Ok();
  }

  /// The machine the candidates run on: a replay's recording (its validators, core count and
  /// --fix), or this one (the compiler's version).
  Status Capture() {
    if (replay_) {
      validators_ = replay_->validators;
      // The space is the recording machine's (its core count bounds THREADS) with its --fix.
      if (size_t at = validators_.find("cores="); at != std::string::npos)
        hardware_threads_ = std::max(1, std::atoi(validators_.c_str() + at + 6));
      fixes_.insert(fixes_.begin(), replay_->fixes.begin(), replay_->fixes.end());
      return Status::Ok();
    }
    builder_ = std::make_unique<Builder>(options_.build, logger_);
    if (builder_->compiler_version().empty())
      return RunFailed("cannot run the compiler '" + options_.build.compiler + "' (needed to build candidates)");
    validators_ = MachineValidators(builder_->compiler_version(), options_.build.flags);
    if (record_) {
      record_->validators = validators_;
      record_->fixes = options_.fixes;
    }
    return Status::Ok();
  }

  /// The bank key: the machine and toolchain, and the kernel template of the operator's type.
  const std::string& BankKey(const std::string& type) {
    auto it = bank_validators_.find(type);
    if (it == bank_validators_.end())
      it = bank_validators_.emplace(type, BankValidators(validators_, KernelTemplateHash(type))).first;
    return it->second;
  }

  Pass Untuned(const OpWork& w, std::string reason, const std::string& done) {
    result_.untuned.push_back({w.desc, std::move(reason)});
    progress_.Done(w.label + done);
    return Pass::kDone;
  }

  Status EvaluatorFailure(const OpWork& w) const {
    if (!w.evaluator->failure().empty()) return RunFailed(w.label + ": " + w.evaluator->failure());
    return Status::Ok();
  }

  Status TuneOne(const OpDesc& desc) {
    OpWork w(desc);
    progress_.Start("Tune " + w.label + ".");
    for (auto pass : {&Session::MakeSpace, &Session::LookUp, &Session::Measure}) {
      auto next = (this->*pass)(w);
      if (!next.ok()) return next.status();
      if (*next == Pass::kDone) return Status::Ok();
    }
    PORTKIT_RETURN_IF_ERROR(ChooseAndSave(w));
    logger_.Info(w.label + ": " + RepoStatusName(w.r.status) + ", " + Us(w.r.before_us) + " -> " + Us(w.r.after_us) +
                 " with " + w.r.config + ".");
    result_.ops.push_back(w.r);
    progress_.Done(w.label + ": " + RepoStatusName(w.r.status) + ".");
    return Status::Ok();
  }

  /// The operator's space with the --fix values, its default, and for a replay the recorded
  /// points only.
  Expected<Pass> MakeSpace(OpWork& w) {
    auto op = MakeOperator(w.desc);
    if (!op.ok()) return Untuned(w, op.status().message(), ": not tuned.");
    w.op = std::move(*op);
    w.space = w.op->Space(hardware_threads_);
    for (size_t f = 0; f < fixes_.size(); ++f) {
      Status st = ApplyFix(w.space, fixes_[f]);
      if (!st.ok() && replay_ && f < replay_->fixes.size())
        return InvalidArgument((replay_->file.empty() ? std::string("the replayed landscape") : replay_->file) +
                               ": fix: " + st.message());
      PORTKIT_RETURN_IF_ERROR(st);
    }
    // The default is chosen before a replay narrows the space to the recorded points, so that it
    // is the recording's default; a --fix set that leaves no valid configuration is an error.
    w.default_config = w.op->DefaultConfig(w.space, hardware_threads_);
    if (std::string why = w.space.Check(w.default_config); !why.empty()) {
      std::string all;
      for (const auto& f : fixes_) all += (all.empty() ? "" : " ") + f;
      return InvalidArgument("--fix " + all + ": no configuration of " + w.desc.type +
                             " satisfies the constraints with these values (" + why + ")");
    }
    if (!replay_) return Pass::kNext;
    auto it = replay_->points.find(w.sig);
    if (it == replay_->points.end()) return Untuned(w, "not in the replayed landscape", ": not in the landscape.");
    w.points = &it->second;
    std::set<std::string> keys;
    for (const auto& [key, p] : *w.points) keys.insert(key);
    w.space.AllowOnly(std::move(keys));
    if (!w.points->count(w.space.Key(w.default_config)))
      return Untuned(w, "the default strategy is not in the replayed landscape", ": default not recorded.");
    return Pass::kNext;
  }

  /// The bank's entry: a usable one is a hit (done unless re-tuning); lookup only ends here.
  Expected<Pass> LookUp(OpWork& w) {
    w.op_validators = BankKey(w.desc.type);
    auto entry = bank_.Lookup(w.sig, w.op_validators);
    if (!entry.ok())
      return RunFailed("cannot read the tuning bank " + bank_.path().string() + ": " + entry.status().message());
    w.r.op = w.desc;
    w.r.signature = w.sig;
    // Every hit is validated: an entry whose configuration is not in the operator's space, or
    // whose times are not plausible, is never used (nor written into the plan); the operator is
    // tuned as if it were missing and the entry replaced.
    if (entry->has_value()) {
      std::string bad = CheckEntry(**entry, w.op->Flops());
      if (bad.empty()) {
        w.found = **entry;
      } else {
        w.unusable_config = (*entry)->config;
        logger_.Warning(w.label + ": the knowledge base entry is unusable (" + bad + "); " +
                        (options_.lookup_only ? "not used." : "tuning as if it were missing."));
      }
    }
    if (w.found && !options_.repeat_tune) {
      RecordHit(w);
      return Pass::kDone;
    }
    if (options_.lookup_only)
      return Untuned(w,
                     w.unusable_config.empty() ? "not in the knowledge base (lookup only)"
                                               : "the knowledge base entry is unusable (lookup only)",
                     ": not in the bank.");
    if (w.found) {
      auto parsed = w.space.Parse(w.found->config);
      if (parsed.ok() && w.space.Valid(*parsed)) w.stored = *parsed;
      else
        logger_.Warning(w.label + ": the stored strategy is outside this run's space (" +
                        (parsed.ok() ? w.space.Check(*parsed) : parsed.status().message()) +
                        "); re-tuning from the default.");
    }
    return Pass::kNext;
  }

  void RecordHit(OpWork& w) {
    const BankEntry& found = *w.found;
    w.r.status = RepoStatus::kHit;
    w.r.bank_hit = true;
    w.r.config = found.config;
    w.r.source = "bank";
    w.r.measured_here = found.measured_here;
    w.r.before_us = found.default_us;
    w.r.after_us = found.time_us;
    logger_.Info(w.label + ": knowledge base hit, " + found.config + " (" + Us(found.time_us) +
                 (found.measured_here ? "" : ", imported: not measured here") + ").");
    result_.ops.push_back(w.r);
    progress_.Done(w.label + ": hit.");
  }

  /// Runs the strategy, then compares its best with the default in one interleaved measurement.
  Expected<Pass> Measure(OpWork& w) {
    if (record_) record_->AddOp(w.desc);
    if (replay_) w.evaluator = std::make_unique<ReplayEvaluator>(w.space, *w.points);
    else
      w.evaluator = std::make_unique<CompileEvaluator>(*w.op, w.space, *builder_, options_.measure, record_, logger_);
    auto strategy = MakeStrategy(options_.strategy, options_.strategy_options);
    if (!strategy.ok()) return strategy.status();
    (*strategy)->Initialise(w.space, w.default_config, OperatorSeed(options_.seed, w.sig));
    w.out = TuneOperator(w.space, w.default_config, w.stored, **strategy, *w.evaluator, options_.budget, logger_,
                         w.label, [this] { return Seconds(); });
    PORTKIT_RETURN_IF_ERROR(EvaluatorFailure(w));
    w.r.evaluations = w.out.evaluations;
    w.r.stop_reason = w.out.stop_reason;
    if (!std::isfinite(w.out.default_us)) {
      // The default strategy is known-good: unless it only ran out of time (a huge operator on
      // a loaded machine), its failure is the toolchain's or the machine's, not a result.
      if (!replay_ && w.out.default_status != "timeout")
        return RunFailed(w.label + ": the default strategy " + w.space.Key(w.default_config) + " failed (" +
                         w.out.default_status + "); the compiler (--compiler " + options_.build.compiler +
                         "), the kernel cache or the machine is broken");
      return Untuned(w, "the default strategy was rejected (" + w.out.default_status + ")", ": failed.");
    }
    CompareWithDefault(w);
    PORTKIT_RETURN_IF_ERROR(EvaluatorFailure(w));
    w.r.before_us = w.default_us;
    return Pass::kNext;
  }

  /// Before/after from one interleaved measurement; the best replaces the default only when it
  /// is significantly faster (CompareSamples), so run-to-run noise is not stored as a gain.
  void CompareWithDefault(OpWork& w) {
    w.best_us = w.out.best_us;
    w.default_us = w.out.default_us;
    w.better_than_default = false;
    if (w.out.best == w.default_config || !std::isfinite(w.best_us)) return;
    auto cmp = w.evaluator->Compare(w.out.best, w.default_config);
    if (!cmp) return;
    w.best_us = cmp->candidate_us;
    w.default_us = cmp->incumbent_us;
    w.better_than_default = cmp->significant;
    if (!cmp->significant)
      logger_.Info(w.label + ": best " + w.space.Key(w.out.best) + " is not significantly faster than the default (" +
                   Us(w.best_us) + " vs " + Us(w.default_us) + ", speed-up lower bound " +
                   std::to_string(cmp->lower_bound) + ").");
  }

  /// AOE's repository rules: a re-tuned hit ends as update or reserved, a new best is added, and
  /// an operator whose default is best stays unsatisfied.
  Status ChooseAndSave(OpWork& w) {
    BankEntry e{w.sig,     w.op_validators, w.desc.type, w.desc.name, w.space.Key(w.out.best),
                w.best_us, w.default_us,    "",          true};
    if (w.found) return SaveRetuned(w, e);
    if (w.better_than_default) return SaveNew(w, e);
    return KeepDefault(w);
  }

  Expected<StoreOutcome> Store(const BankEntry& entry, const std::string& remeasured_config, double remeasured_us) {
    auto st = bank_.StoreIfBetter(entry, remeasured_config, remeasured_us);
    if (!st.ok())
      return RunFailed("cannot write the tuning bank " + bank_.path().string() + ": " + st.status().message());
    return *st;
  }

  /// A concurrent tuner may have stored another entry meanwhile: what runs is what the bank holds.
  Status ReportKept(OpWork& w) {
    auto kept = bank_.Lookup(w.sig, w.op_validators);
    if (!kept.ok())
      return RunFailed("cannot read the tuning bank " + bank_.path().string() + ": " + kept.status().message());
    if (kept->has_value() && CheckEntry(**kept, w.op->Flops()).empty()) {
      w.r.config = (**kept).config;
      w.r.after_us = (**kept).time_us;
      w.r.measured_here = (**kept).measured_here;
      w.r.source = "bank";
    }
    return Status::Ok();
  }

  /// Re-tune of an entry found in the bank (a hit): ends as update or reserved.
  Status SaveRetuned(OpWork& w, BankEntry& e) {
    const BankEntry& found = *w.found;
    w.r.bank_hit = true;
    double stored_now = w.out.stored_us;
    bool better = w.better_than_default;
    if (w.stored && w.out.best == *w.stored) {
      better = false;
    } else if (w.stored && std::isfinite(stored_now) && better) {
      auto cmp = w.evaluator->Compare(w.out.best, *w.stored);
      PORTKIT_RETURN_IF_ERROR(EvaluatorFailure(w));
      better = cmp && cmp->significant;
      if (cmp) {
        stored_now = cmp->incumbent_us;
        e.time_us = cmp->candidate_us;
      }
    }
    // The stored strategy, re-measured here (+inf when it no longer runs here: then any valid
    // best replaces it).
    double stored_fresh = w.stored && std::isfinite(stored_now) ? stored_now : kRejected;
    w.r.status = RepoStatus::kReserved;
    if (better) {
      auto st = Store(e, found.config, w.stored ? stored_fresh : found.time_us);
      if (!st.ok()) return st.status();
      if (*st != StoreOutcome::kKept) w.r.status = RepoStatus::kUpdate;
    }
    if (w.r.status == RepoStatus::kUpdate) {
      w.r.config = e.config;
      w.r.after_us = e.time_us;
      w.r.source = "tuned";
      return Status::Ok();
    }
    w.r.config = found.config;
    w.r.after_us = std::isfinite(stored_fresh) ? stored_fresh : found.time_us;
    w.r.measured_here = found.measured_here;
    w.r.source = "bank";
    if (!found.measured_here && w.stored && std::isfinite(stored_fresh)) {
      // An imported entry kept: it is now measured here, with this machine's time.
      BankEntry again = found;
      again.time_us = stored_fresh;
      again.default_us = w.default_us;
      again.measured_here = true;
      again.updated.clear();
      auto st = Store(again, found.config, kRejected);
      if (!st.ok()) return st.status();
      w.r.measured_here = true;
    }
    if (better) PORTKIT_RETURN_IF_ERROR(ReportKept(w));
    return Status::Ok();
  }

  /// A best significantly faster than the default, for an operator the bank did not hold.
  Status SaveNew(OpWork& w, const BankEntry& e) {
    auto st = Store(e, w.unusable_config, kRejected);
    if (!st.ok()) return st.status();
    w.r.status = *st == StoreOutcome::kKept ? RepoStatus::kReserved : RepoStatus::kAdd;
    w.r.config = e.config;
    w.r.after_us = w.best_us;
    w.r.source = "tuned";
    if (*st == StoreOutcome::kKept) {
      // A concurrent tuner stored a faster entry first: the bank had it when this result was
      // stored, so it counts as a hit kept (reserved); that entry is what runs.
      w.r.bank_hit = true;
      PORTKIT_RETURN_IF_ERROR(ReportKept(w));
    }
    return Status::Ok();
  }

  /// Nothing beat the default: it stays, and an unusable entry is removed.
  Status KeepDefault(OpWork& w) {
    if (!w.unusable_config.empty()) {
      // Nothing replaces the unusable entry: remove it, so that no later run trips on it.
      auto removed = bank_.RemoveIfStill(w.sig, w.op_validators, w.unusable_config);
      if (!removed.ok())
        return RunFailed("cannot write the tuning bank " + bank_.path().string() + ": " + removed.status().message());
    }
    w.r.status = RepoStatus::kUnsatisfied;
    w.r.config = w.space.Key(w.default_config);
    w.r.after_us = w.default_us;
    w.r.source = "default";
    return Status::Ok();
  }

  const OpList& list_;
  const SessionOptions& options_;
  KnowledgeBase& bank_;
  const Landscape* replay_;
  Landscape* record_;
  Logger& logger_;
  std::chrono::steady_clock::time_point start_;
  Progress progress_;
  SessionResult result_;
  std::unique_ptr<Builder> builder_;
  std::string validators_;
  int hardware_threads_;
  std::vector<std::string> fixes_;
  std::map<std::string, std::string> bank_validators_;
};

}  // namespace

Expected<SessionResult> RunSession(const OpList& list, const SessionOptions& options, KnowledgeBase& bank,
                                   const Landscape* replay, Landscape* record, Logger& logger) {
  return Session(list, options, bank, replay, record, logger).Run();
}

}  // namespace portkit::tune
