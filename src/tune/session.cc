#include "tune/session.h"

#include <chrono>
#include <cmath>
#include <algorithm>
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

std::string Us(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f us", us);
  return buf;
}

}  // namespace

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
      return InvalidArgument("cannot run the compiler '" + options.build.compiler + "' (needed to build candidates)");
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
  for (const auto& desc : list.ops) {
    std::string sig = Signature(desc);
    std::string label = desc.name + " (" + desc.type + ")";
    progress.Start("Tune " + label + ".");
    auto op = MakeOperator(desc);
    if (!op.ok()) {
      result.untuned.push_back({desc, op.status().message()});
      progress.Done(label + ": not tuned.");
      continue;
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
        continue;
      }
      points = &it->second;
      std::set<std::string> keys;
      for (const auto& [key, p] : *points) keys.insert(key);
      space.AllowOnly(std::move(keys));
    }
    if (replay && !points->count(space.Key(default_config))) {
      result.untuned.push_back({desc, "the default strategy is not in the replayed landscape"});
      progress.Done(label + ": default not recorded.");
      continue;
    }

    const std::string& op_validators = key_of(desc.type);
    auto entry = bank.Lookup(sig, op_validators);
    if (!entry.ok()) return entry.status();
    OpResult r;
    r.op = desc;
    r.signature = sig;
    if (entry->has_value() && !options.repeat_tune) {
      const BankEntry& e = **entry;
      r.status = RepoStatus::kHit;
      r.config = e.config;
      r.source = "bank";
      r.before_us = e.default_us;
      r.after_us = e.time_us;
      logger.Info(label + ": knowledge base hit, " + e.config + " (" + Us(e.time_us) + ").");
      result.ops.push_back(r);
      progress.Done(label + ": hit.");
      continue;
    }
    std::optional<Config> stored;
    if (entry->has_value()) {
      auto parsed = space.Parse((*entry)->config);
      if (parsed.ok()) stored = *parsed;
      else logger.Warning(label + ": stored strategy no longer parses (" + parsed.status().message() + "); re-tuning from the default.");
    }

    if (record) record->AddOp(desc);
    std::unique_ptr<Evaluator> evaluator;
    if (replay) evaluator = std::make_unique<ReplayEvaluator>(space, *points);
    else evaluator = std::make_unique<CompileEvaluator>(**op, space, *builder, options.measure, record, logger);
    auto strategy = MakeStrategy(options.strategy, options.strategy_options);
    if (!strategy.ok()) return strategy.status();
    (*strategy)->Initialise(space, default_config, options.seed ^ HashString(sig));
    TuneOutcome out = TuneOperator(space, default_config, stored, **strategy, *evaluator, options.budget, logger, label,
                                   seconds);
    r.evaluations = out.evaluations;
    r.stop_reason = out.stop_reason;
    if (!std::isfinite(out.default_us)) {
      result.untuned.push_back({desc, "the default strategy was rejected (" + out.default_status + ")"});
      progress.Done(label + ": failed.");
      continue;
    }
    // Before/after from one interleaved measurement, so the reported gain is not run-to-run noise.
    double best_us = out.best_us, default_us = out.default_us;
    bool better_than_default = false;
    if (out.best != default_config && std::isfinite(best_us)) {
      double b = 0, d = 0;
      if (evaluator->Confirm(out.best, default_config, &b, &d)) {
        best_us = b;
        default_us = d;
        better_than_default = b < d;
      }
    }
    r.before_us = default_us;
    std::string best_key = space.Key(out.best);
    BankEntry e{sig, op_validators, desc.type, desc.name, best_key, best_us, default_us, ""};
    if (stored) {
      // Re-tune: replace the entry only when the new best beats the stored strategy now.
      double stored_now = out.stored_us;
      bool better = false;
      if (out.best != *stored && std::isfinite(best_us)) {
        double b = 0, s = 0;
        if (evaluator->Confirm(out.best, *stored, &b, &s)) {
          better = b < s;
          stored_now = s;
          e.time_us = b;
        }
      }
      if (better && better_than_default) {
        auto st = bank.StoreIfBetter(e, (*entry)->config, stored_now);
        if (!st.ok()) return st.status();
        r.status = *st == StoreOutcome::kKept ? RepoStatus::kReserved : RepoStatus::kUpdate;
        if (*st == StoreOutcome::kKept) {
          // Kept: the entry may have been replaced by a concurrent tuner meanwhile; re-read it.
          auto kept = bank.Lookup(sig, op_validators);
          if (!kept.ok()) return kept.status();
          if (kept->has_value() && (**kept).config != (*entry)->config) {
            r.config = (**kept).config;
            r.after_us = (**kept).time_us;
          }
        }
      } else {
        r.status = RepoStatus::kReserved;
      }
      if (r.status == RepoStatus::kUpdate) {
        r.config = best_key;
        r.after_us = e.time_us;
      } else if (r.config.empty()) {
        r.config = (*entry)->config;
        r.after_us = std::isfinite(stored_now) ? stored_now : (*entry)->time_us;
      }
      r.source = r.status == RepoStatus::kUpdate ? "tuned" : "bank";
    } else if (better_than_default) {
      auto st = bank.StoreIfBetter(e);
      if (!st.ok()) return st.status();
      r.status = *st == StoreOutcome::kKept ? RepoStatus::kReserved : RepoStatus::kAdd;
      r.config = best_key;
      r.after_us = best_us;
      r.source = "tuned";
      if (*st == StoreOutcome::kKept) {
        // A concurrent tuner stored a faster entry first: that one is what runs; report it.
        auto kept = bank.Lookup(sig, op_validators);
        if (!kept.ok()) return kept.status();
        if (kept->has_value()) {
          r.config = (**kept).config;
          r.after_us = (**kept).time_us;
          r.source = "bank";
        }
      }
    } else {
      r.status = RepoStatus::kUnsatisfied;
      r.config = space.Key(default_config);
      r.after_us = default_us;
      r.source = "default";
    }
    logger.Info(label + ": " + RepoStatusName(r.status) + ", " + Us(r.before_us) + " -> " + Us(r.after_us) + " with " +
                r.config + ".");
    result.ops.push_back(r);
    progress.Done(label + ": " + RepoStatusName(r.status) + ".");
  }
  result.seconds = seconds();
  return result;
}

}  // namespace portkit::tune
