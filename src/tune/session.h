#pragma once
/// A tuning session over a model's operators (OPAT): for each operator, the knowledge base is
/// consulted, the operator tuned when needed, and the bank updated by AOE's repository rules.
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/log.h"
#include "tune/builder.h"
#include "tune/knowledge_base.h"
#include "tune/landscape.h"
#include "tune/op_desc.h"
#include "tune/runner.h"
#include "tune/tuner.h"

namespace portkit::tune {

/// The seed a strategy gets for one operator: `--seed` mixed with the operator's signature.
uint64_t OperatorSeed(uint64_t seed, std::string_view signature);

struct SessionOptions {
  std::string strategy = kDefaultStrategy;
  std::vector<std::string> strategy_options;  ///< NAME=VALUE
  Budget budget;
  uint64_t seed = 0;
  bool repeat_tune = false;
  std::vector<std::string> fixes;  ///< --fix NAME=V1[,V2]
  MeasureOptions measure;
  BuildOptions build;
  int hardware_threads = 1;
  /// Only look operators up (a read-only bank works): hits are used, nothing is tuned or stored;
  /// an operator without a usable entry is listed untuned.
  bool lookup_only = false;
  /// Called with the result so far before the first operator and after each one (the result
  /// file is written as tuning proceeds); an error stops the run (run failed).
  std::function<Status(const struct SessionResult&)> on_progress;
};

/// What happened to an operator, in AOE's repository terms.
enum class RepoStatus { kAdd, kHit, kUpdate, kReserved, kUnsatisfied };
const char* RepoStatusName(RepoStatus s);

struct OpResult {
  OpDesc op;
  std::string signature;
  RepoStatus status = RepoStatus::kUnsatisfied;  ///< how it ended
  /// Found in the bank (counted as a hit, seed 004): a plain hit, or under REPEAT_TUNE an entry
  /// re-tuned to update / reserved; also an entry a concurrent tuner stored before this one could.
  bool bank_hit = false;
  std::string config;         ///< the strategy the operator runs with after this session
  std::string source;         ///< "tuned", "bank" or "default"
  bool measured_here = true;  ///< false: the bank entry used was imported and not re-measured here
  double before_us = 0;       ///< default strategy
  double after_us = 0;        ///< chosen strategy
  int evaluations = 0;
  std::string stop_reason;
};

struct SessionResult {
  std::string name;
  std::string strategy;
  double seconds = 0;
  std::vector<OpResult> ops;
  std::vector<UntunedOp> untuned;
  std::string bank_path;
  std::string validators;  ///< the machine and toolchain part of the bank key (MachineValidators)
};

/// Runs the session. With `replay`, candidates are answered from the landscape (no compiling),
/// and the landscape's validators key the bank; otherwise every measurement is added to
/// `record`. Errors are for the session as a whole: a bad strategy or --fix (kInvalidArgument),
/// and infrastructure failures (kInternal, "run failed: ..."): the known-good default strategy
/// failing to build or run, a toolchain that no longer builds it after a candidate's compile
/// error, a bank, landscape or progress write that fails. Those are never recorded as results.
Expected<SessionResult> RunSession(const OpList& list, const SessionOptions& options, KnowledgeBase& bank,
                                   const Landscape* replay, Landscape* record, Logger& logger);

}  // namespace portkit::tune
