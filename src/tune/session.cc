#include "tune/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

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

Expected<SessionResult> RunSession(const OpList& list, const SessionOptions& options, KnowledgeBase& bank,
                                   const Landscape* replay, Landscape* record, Logger& logger) {
  auto start_time = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count(); };
  // Validate the strategy and its options once, before any work.
  if (auto probe = MakeStrategy(options.strategy, options.strategy_options); !probe.ok()) return probe.status();

  SessionResult result;
  result.name = list.name.empty() ? "portkit_tune" : list.name;
  result.strategy = options.strategy;
  result.untuned = list.untuned;
  result.bank_path = bank.path().string();

  std::unique_ptr<Builder> builder;
  std::string validators;
  int hardware_threads = options.hardware_threads;
  std::vector<std::string> fixes = options.fixes;
  if (replay) {
    validators = replay->validators;
    // The space is the recording machine's (its core count bounds THREADS) with its --fix.
    if (size_t at = validators.find("cores="); at != std::string::npos)
      hardware_threads = std::max(1, std::atoi(validators.c_str() + at + 6));
    fixes.insert(fixes.begin(), replay->fixes.begin(), replay->fixes.end());
  } else {
    builder = std::make_unique<Builder>(options.build, logger);
    if (builder->compiler_version().empty())
      return RunFailed("cannot run the compiler '" + options.build.compiler + "' (needed to build candidates)");
    validators = MachineValidators(builder->compiler_version(), options.build.flags);
    if (record) {
      record->validators = validators;
      record->fixes = options.fixes;
    }
  }

  result.validators = validators;
  // The bank key: the machine and toolchain, and the kernel template of the operator's type.
  std::map<std::string, std::string> bank_validators;
  auto key_of = [&](const std::string& type) -> const std::string& {
    auto it = bank_validators.find(type);
    if (it == bank_validators.end())
      it = bank_validators.emplace(type, BankValidators(validators, KernelTemplateHash(type))).first;
    return it->second;
  };

  Progress progress(logger, list.ops.size());
  if (options.on_progress)
    if (Status st = options.on_progress(result); !st.ok()) return RunFailed(st.message());
  auto tune_one = [&](const OpDesc& desc) -> Status {
    std::string sig = Signature(desc);
    std::string label = desc.name + " (" + desc.type + ")";
    progress.Start("Tune " + label + ".");
    auto op = MakeOperator(desc);
    if (!op.ok()) {
      result.untuned.push_back({desc, op.status().message()});
      progress.Done(label + ": not tuned.");
      return Status::Ok();
    }
    SearchSpace space = (*op)->Space(hardware_threads);
    for (size_t f = 0; f < fixes.size(); ++f) {
      Status st = ApplyFix(space, fixes[f]);
      if (!st.ok() && replay && f < replay->fixes.size())
        return InvalidArgument((replay->file.empty() ? std::string("the replayed landscape") : replay->file) +
                               ": fix: " + st.message());
      PORTKIT_RETURN_IF_ERROR(st);
    }
    // The default is chosen before a replay narrows the space to the recorded points, so that it
    // is the recording's default; a --fix set that leaves no valid configuration is an error.
    Config default_config = (*op)->DefaultConfig(space, hardware_threads);
    if (std::string why = space.Check(default_config); !why.empty()) {
      std::string all;
      for (const auto& f : fixes) all += (all.empty() ? "" : " ") + f;
      return InvalidArgument("--fix " + all + ": no configuration of " + desc.type +
                             " satisfies the constraints with these values (" + why + ")");
    }
    const std::map<std::string, LandscapePoint>* points = nullptr;
    if (replay) {
      auto it = replay->points.find(sig);
      if (it == replay->points.end()) {
        result.untuned.push_back({desc, "not in the replayed landscape"});
        progress.Done(label + ": not in the landscape.");
        return Status::Ok();
      }
      points = &it->second;
      std::set<std::string> keys;
      for (const auto& [key, p] : *points) keys.insert(key);
      space.AllowOnly(std::move(keys));
    }
    if (replay && !points->count(space.Key(default_config))) {
      result.untuned.push_back({desc, "the default strategy is not in the replayed landscape"});
      progress.Done(label + ": default not recorded.");
      return Status::Ok();
    }

    const std::string& op_validators = key_of(desc.type);
    auto entry = bank.Lookup(sig, op_validators);
    if (!entry.ok())
      return RunFailed("cannot read the tuning bank " + bank.path().string() + ": " + entry.status().message());
    OpResult r;
    r.op = desc;
    r.signature = sig;
    // Every hit is validated: an entry whose configuration is not in the operator's space, or
    // whose times are not plausible, is never used (nor written into the plan); the operator is
    // tuned as if it were missing and the entry replaced.
    std::optional<BankEntry> found;
    std::string unusable_config;
    if (entry->has_value()) {
      std::string bad = CheckEntry(**entry, (*op)->Flops());
      if (bad.empty()) {
        found = **entry;
      } else {
        unusable_config = (*entry)->config;
        logger.Warning(label + ": the knowledge base entry is unusable (" + bad + "); " +
                       (options.lookup_only ? "not used." : "tuning as if it were missing."));
      }
    }
    if (found && !options.repeat_tune) {
      r.status = RepoStatus::kHit;
      r.bank_hit = true;
      r.config = found->config;
      r.source = "bank";
      r.measured_here = found->measured_here;
      r.before_us = found->default_us;
      r.after_us = found->time_us;
      logger.Info(label + ": knowledge base hit, " + found->config + " (" + Us(found->time_us) +
                  (found->measured_here ? "" : ", imported: not measured here") + ").");
      result.ops.push_back(r);
      progress.Done(label + ": hit.");
      return Status::Ok();
    }
    if (options.lookup_only) {
      result.untuned.push_back({desc, unusable_config.empty() ? "not in the knowledge base (lookup only)"
                                                              : "the knowledge base entry is unusable (lookup only)"});
      progress.Done(label + ": not in the bank.");
      return Status::Ok();
    }
    std::optional<Config> stored;
    if (found) {
      auto parsed = space.Parse(found->config);
      if (parsed.ok() && space.Valid(*parsed)) stored = *parsed;
      else
        logger.Warning(label + ": the stored strategy is outside this run's space (" +
                       (parsed.ok() ? space.Check(*parsed) : parsed.status().message()) +
                       "); re-tuning from the default.");
    }

    if (record) record->AddOp(desc);
    std::unique_ptr<Evaluator> evaluator;
    if (replay) evaluator = std::make_unique<ReplayEvaluator>(space, *points);
    else evaluator = std::make_unique<CompileEvaluator>(**op, space, *builder, options.measure, record, logger);
    auto strategy = MakeStrategy(options.strategy, options.strategy_options);
    if (!strategy.ok()) return strategy.status();
    (*strategy)->Initialise(space, default_config, OperatorSeed(options.seed, sig));
    TuneOutcome out =
        TuneOperator(space, default_config, stored, **strategy, *evaluator, options.budget, logger, label, seconds);
    if (!evaluator->failure().empty()) return RunFailed(label + ": " + evaluator->failure());
    r.evaluations = out.evaluations;
    r.stop_reason = out.stop_reason;
    if (!std::isfinite(out.default_us)) {
      // The default strategy is known-good: unless it only ran out of time (a huge operator on
      // a loaded machine), its failure is the toolchain's or the machine's, not a result.
      if (!replay && out.default_status != "timeout")
        return RunFailed(label + ": the default strategy " + space.Key(default_config) + " failed (" +
                         out.default_status + "); the compiler (--compiler " + options.build.compiler +
                         "), the kernel cache or the machine is broken");
      result.untuned.push_back({desc, "the default strategy was rejected (" + out.default_status + ")"});
      progress.Done(label + ": failed.");
      return Status::Ok();
    }
    // Before/after from one interleaved measurement; the best replaces the default only when it
    // is significantly faster (CompareSamples), so run-to-run noise is not stored as a gain.
    double best_us = out.best_us, default_us = out.default_us;
    bool better_than_default = false;
    if (out.best != default_config && std::isfinite(best_us)) {
      if (auto cmp = evaluator->Compare(out.best, default_config)) {
        best_us = cmp->candidate_us;
        default_us = cmp->incumbent_us;
        better_than_default = cmp->significant;
        if (!cmp->significant)
          logger.Info(label + ": best " + space.Key(out.best) + " is not significantly faster than the default (" +
                      Us(best_us) + " vs " + Us(default_us) + ", speed-up lower bound " +
                      std::to_string(cmp->lower_bound) + ").");
      }
    }
    if (!evaluator->failure().empty()) return RunFailed(label + ": " + evaluator->failure());
    r.before_us = default_us;
    std::string best_key = space.Key(out.best);
    BankEntry e{sig, op_validators, desc.type, desc.name, best_key, best_us, default_us, "", true};
    auto store = [&](const BankEntry& entry, const std::string& remeasured_config,
                     double remeasured_us) -> Expected<StoreOutcome> {
      auto st = bank.StoreIfBetter(entry, remeasured_config, remeasured_us);
      if (!st.ok())
        return RunFailed("cannot write the tuning bank " + bank.path().string() + ": " + st.status().message());
      return *st;
    };
    // A concurrent tuner may have stored another entry meanwhile: what runs is what the bank holds.
    auto report_kept = [&]() -> Status {
      auto kept = bank.Lookup(sig, op_validators);
      if (!kept.ok())
        return RunFailed("cannot read the tuning bank " + bank.path().string() + ": " + kept.status().message());
      if (kept->has_value() && CheckEntry(**kept, (*op)->Flops()).empty()) {
        r.config = (**kept).config;
        r.after_us = (**kept).time_us;
        r.measured_here = (**kept).measured_here;
        r.source = "bank";
      }
      return Status::Ok();
    };
    if (found) {
      // Re-tune of an entry found in the bank (a hit): ends as update or reserved.
      r.bank_hit = true;
      double stored_now = out.stored_us;
      bool better = better_than_default;
      if (stored && out.best == *stored) {
        better = false;
      } else if (stored && std::isfinite(stored_now) && better) {
        auto cmp = evaluator->Compare(out.best, *stored);
        if (!evaluator->failure().empty()) return RunFailed(label + ": " + evaluator->failure());
        better = cmp && cmp->significant;
        if (cmp) {
          stored_now = cmp->incumbent_us;
          e.time_us = cmp->candidate_us;
        }
      }
      // The stored strategy, re-measured here (+inf when it no longer runs here: then any valid
      // best replaces it).
      double stored_fresh = stored && std::isfinite(stored_now) ? stored_now : kRejected;
      if (better) {
        auto st = store(e, found->config, stored ? stored_fresh : found->time_us);
        if (!st.ok()) return st.status();
        r.status = *st == StoreOutcome::kKept ? RepoStatus::kReserved : RepoStatus::kUpdate;
      } else {
        r.status = RepoStatus::kReserved;
      }
      if (r.status == RepoStatus::kUpdate) {
        r.config = best_key;
        r.after_us = e.time_us;
        r.source = "tuned";
      } else {
        r.config = found->config;
        r.after_us = std::isfinite(stored_fresh) ? stored_fresh : found->time_us;
        r.measured_here = found->measured_here;
        r.source = "bank";
        if (!found->measured_here && stored && std::isfinite(stored_fresh)) {
          // An imported entry kept: it is now measured here, with this machine's time.
          BankEntry again = *found;
          again.time_us = stored_fresh;
          again.default_us = default_us;
          again.measured_here = true;
          again.updated.clear();
          auto st = store(again, found->config, kRejected);
          if (!st.ok()) return st.status();
          r.measured_here = true;
        }
        if (better) PORTKIT_RETURN_IF_ERROR(report_kept());
      }
    } else if (better_than_default) {
      auto st = store(e, unusable_config, kRejected);
      if (!st.ok()) return st.status();
      r.status = *st == StoreOutcome::kKept ? RepoStatus::kReserved : RepoStatus::kAdd;
      r.config = best_key;
      r.after_us = best_us;
      r.source = "tuned";
      if (*st == StoreOutcome::kKept) {
        // A concurrent tuner stored a faster entry first: the bank had it when this result was
        // stored, so it counts as a hit kept (reserved); that entry is what runs.
        r.bank_hit = true;
        PORTKIT_RETURN_IF_ERROR(report_kept());
      }
    } else {
      if (!unusable_config.empty()) {
        // Nothing replaces the unusable entry: remove it, so that no later run trips on it.
        auto removed = bank.RemoveIfStill(sig, op_validators, unusable_config);
        if (!removed.ok())
          return RunFailed("cannot write the tuning bank " + bank.path().string() + ": " + removed.status().message());
      }
      r.status = RepoStatus::kUnsatisfied;
      r.config = space.Key(default_config);
      r.after_us = default_us;
      r.source = "default";
    }
    logger.Info(label + ": " + RepoStatusName(r.status) + ", " + Us(r.before_us) + " -> " + Us(r.after_us) + " with " +
                r.config + ".");
    result.ops.push_back(r);
    progress.Done(label + ": " + RepoStatusName(r.status) + ".");
    return Status::Ok();
  };
  for (const auto& desc : list.ops) {
    PORTKIT_RETURN_IF_ERROR(tune_one(desc));
    result.seconds = seconds();
    if (options.on_progress)
      if (Status st = options.on_progress(result); !st.ok()) return RunFailed(st.message());
  }
  result.seconds = seconds();
  return result;
}

}  // namespace portkit::tune
