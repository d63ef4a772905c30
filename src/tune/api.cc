#include "tune/api.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/atomic_file.h"
#include "core/input_files.h"
#include "tune/landscape.h"
#include "tune/op_desc.h"
#include "tune/operators/operator.h"
#include "tune/prof_input.h"
#include "tune/strategies/strategy.h"

namespace portkit::tune {
namespace fs = std::filesystem;
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

int ThisMachineThreads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

Expected<OpList> ReadModel(const fs::path& model) {
  std::error_code ec;
  if (fs::is_directory(model, ec)) return OpsFromProfile(model);
  auto text = ReadFile(model);
  if (!text.ok()) return text.status();
  return ParseOpList(*text, model.string());
}

/// The operators of the run: a recorded landscape (then `*landscape` holds it) or the --model
/// file or folder. What was left out or cannot be tuned is logged.
Expected<OpList> ReadOperators(const TuneOptions& o, std::optional<Landscape>* landscape, TuneReport& report,
                               Logger& log) {
  OpList list;
  if (!o.replay.empty()) {
    auto text = ReadFile(o.replay);
    if (!text.ok()) return text.status();
    auto parsed = ParseLandscape(*text, o.replay.string());
    if (!parsed.ok()) return parsed.status();
    *landscape = std::move(*parsed);
    list.name = o.replay.stem().string();
    list.ops = (*landscape)->ops;
  }
  if (!o.model.empty()) {
    auto parsed = ReadModel(o.model);
    if (!parsed.ok()) return parsed.status();
    list = std::move(*parsed);
  }
  for (const auto& note : list.left_out) log.Warning(note);
  report.input_left_out = list.left_out;
  for (const auto& u : list.untuned) log.Warning(u.op.name + " (" + u.op.type + ") is not tuned: " + u.reason);
  if (list.ops.empty() && list.untuned.empty()) log.Warning(report.input + ": no operators to tune");
  return list;
}

/// A run that tunes writes the bank: say so clearly when it cannot.
Status CheckBankWritable(const fs::path& bank) {
  fs::path db = BankDatabasePath(bank);
  std::error_code ec;
  fs::path folder = db.parent_path().empty() ? fs::path(".") : db.parent_path();
  bool db_ro = fs::exists(db, ec) && ::access(db.c_str(), W_OK) != 0;
  bool folder_ro = fs::exists(folder, ec) && ::access(folder.c_str(), W_OK) != 0;
  if (db_ro || folder_ro)
    return InvalidArgument("the tuning bank " + (db_ro ? db.string() : folder.string()) +
                           " is read-only; tuning stores its results there: give --lookup-only to only use its "
                           "entries, or another --tune-bank");
  return Status::Ok();
}

/// The kernel cache holds shared objects this process loads: they run as the user. A cache
/// someone else can write (a shared bank folder) is refused before anything is built or loaded;
/// each object is checked again as it is opened (docs/safety.md, code run in this process).
Status PrepareKernelCache(const fs::path& cache_dir) {
  std::error_code ec;
  if (!fs::exists(cache_dir, ec) && ::mkdir(cache_dir.c_str(), 0755) != 0 && errno != EEXIST)
    return IoError("cannot create the kernel cache " + cache_dir.string() + ": " + std::strerror(errno));
  if (Status st = CheckPrivateFolder(cache_dir, "the kernel cache"); !st.ok())
    return InvalidArgument(st.message() + " (give another --tune-bank)");
  return Status::Ok();
}

/// The session's options from the run's; a measuring run's kernel cache is created and checked.
Expected<SessionOptions> MakeSessionOptions(const TuneOptions& o, const KnowledgeBase& kb, bool replay) {
  SessionOptions so;
  so.strategy = o.strategy;
  so.strategy_options = o.strategy_options;
  so.budget.max_evals = o.max_evals;
  so.budget.max_seconds = o.max_seconds;
  so.budget.patience = o.patience;
  so.budget.batch = o.parallel_compile;
  so.seed = o.seed;
  so.repeat_tune = o.repeat_tune;
  so.fixes = o.fixes;
  so.measure.repeats = o.repeats;
  so.build.compiler = o.compiler;
  so.build.cache_dir = kb.path().parent_path() / "kernels";
  if (!replay && !o.lookup_only) PORTKIT_RETURN_IF_ERROR(PrepareKernelCache(so.build.cache_dir));
  so.build.parallel = o.parallel_compile;
  so.hardware_threads = o.hardware_threads > 0 ? o.hardware_threads : ThisMachineThreads();
  so.lookup_only = o.lookup_only;
  so.on_progress = o.on_progress;
  return so;
}

void LogStart(const TuneOptions& o, const OpList& list, const KnowledgeBase& kb, bool replay, Logger& log) {
  log.Info(
      "Tuning " + std::to_string(list.ops.size()) + " operators with strategy " + o.strategy + " (max " +
      std::to_string(o.max_evals) + " evaluations each" +
      (replay ? ", replaying " + o.replay.string() : ", " + std::to_string(o.parallel_compile) + " parallel compiles") +
      "); knowledge base " + kb.path().string() + (o.repeat_tune ? " (repeat tune)" : "") +
      (o.lookup_only ? " (lookup only)" : "") + ".");
}

/// The streamed file holds every measurement in order (with an earlier run's, when it was
/// appended to); rewrite it sorted and deduplicated. A run that measured nothing leaves an
/// existing landscape alone.
Status FinishLandscape(const fs::path& record, Landscape& recorded, TuneReport& report) {
  recorded.CloseStream();
  fs::path file = recorded.streamed_file();
  std::error_code ec;
  if (file.empty() && !fs::exists(record, ec)) file = record;
  if (file.empty()) return Status::Ok();
  if (Status st = WriteFileAtomic(file, recorded.ToJsonLines()); !st.ok())
    return Status(ErrorCode::kInternal, "run failed: " + st.message());
  report.landscape = file;
  report.files_written.push_back(file);
  return Status::Ok();
}

/// Operators to tune, and not one of them could run its default kernel: the toolchain is broken
/// (a compiler that fails on everything), which is a failed run rather than a result.
Status CheckToolchainRan(const SessionResult& session, const std::string& compiler) {
  if (!session.ops.empty()) return Status::Ok();
  for (const auto& u : session.untuned)
    if (u.reason.rfind("the default strategy was rejected", 0) == 0)
      return Status(ErrorCode::kInternal, "no operator could build and run its default kernel (" + u.op.name + ": " +
                                              u.reason + "); check the compiler (--compiler " + compiler + ")");
  return Status::Ok();
}
}  // namespace

Status ValidateTuneOptions(const TuneOptions& o) {
  if (o.job_type != 2)
    return InvalidArgument("--job-type=" + std::to_string(o.job_type) +
                           ": only operator tuning (2) is supported; subgraph tuning (1) is not");
  if (auto probe = MakeStrategy(o.strategy, o.strategy_options); !probe.ok()) return probe.status();
  if (o.max_evals < 1) return InvalidArgument("--max-evals " + std::to_string(o.max_evals) + ": give at least 1");
  if (!(o.max_seconds >= 0)) return InvalidArgument("--max-seconds: give 0 (no limit) or more");
  if (o.patience < 0) return InvalidArgument("--patience " + std::to_string(o.patience) + ": give 0 (never) or more");
  if (o.repeats < 5 || o.repeats > 1000)
    return InvalidArgument("--repeats " + std::to_string(o.repeats) + ": give 5 to 1000");
  if (o.parallel_compile < 1)
    return InvalidArgument("--parallel-compile " + std::to_string(o.parallel_compile) + ": give at least 1");
  if (o.compiler.empty()) return InvalidArgument("--compiler: give a C++ compiler");
  // The knobs are the GEMM template's, shared by every operator type; the THREADS values allowed
  // depend on the machine (a replay's is the recording's), so the widest space is checked.
  OpDesc probe_desc;
  probe_desc.name = "probe";
  probe_desc.type = "MatMul";
  probe_desc.layout = "ND";
  probe_desc.inputs = {{8, 8}, {8, 8}};
  auto probe_op = MakeOperator(probe_desc);
  if (!probe_op.ok()) return probe_op.status();
  SearchSpace space = (*probe_op)->Space(4096);
  for (const auto& fix : o.fixes) PORTKIT_RETURN_IF_ERROR(ApplyFix(space, fix));
  if (o.model.empty() && o.replay.empty())
    return InvalidArgument(
        "give --model FILE (an operator list or a profile folder) or --replay LANDSCAPE; see "
        "portkit tune --help");
  if (o.bank.empty()) return InvalidArgument("no tuning bank location given (--tune-bank)");
  return Status::Ok();
}

Expected<TuneReport> RunTune(const TuneOptions& o, Context& ctx) {
  auto start = std::chrono::steady_clock::now();
  PORTKIT_RETURN_IF_ERROR(ValidateTuneOptions(o));
  Logger& log = ctx.logger;
  TuneReport report;
  report.replay = !o.replay.empty();
  report.input = (o.model.empty() ? o.replay : o.model).string();

  std::optional<Landscape> landscape;
  auto list = ReadOperators(o, &landscape, report, log);
  if (!list.ok()) return list.status();

  // The landscape file is checked before the bank is touched, so that an unwritable one fails
  // at once; it is created at the first measurement.
  Landscape recorded;
  bool recording = !landscape && !o.record.empty() && !o.lookup_only;
  if (recording) PORTKIT_RETURN_IF_ERROR(recorded.StreamTo(o.record));
  if (!o.lookup_only) PORTKIT_RETURN_IF_ERROR(CheckBankWritable(o.bank));
  auto kb = KnowledgeBase::Open(o.bank, o.lookup_only ? BankAccess::kReadOnly : BankAccess::kReadWrite);
  if (!kb.ok()) return kb.status();
  report.timings.load_seconds = SecondsSince(start);

  auto so = MakeSessionOptions(o, *kb, landscape.has_value());
  if (!so.ok()) return so.status();
  LogStart(o, *list, *kb, landscape.has_value(), log);
  auto tune_start = std::chrono::steady_clock::now();
  auto result = RunSession(*list, *so, *kb, landscape ? &*landscape : nullptr, landscape ? nullptr : &recorded, log);
  if (!result.ok()) return result.status();
  report.timings.tune_seconds = SecondsSince(tune_start);
  if (recording) PORTKIT_RETURN_IF_ERROR(FinishLandscape(o.record, recorded, report));
  report.session = std::move(*result);
  if (!landscape && !list->ops.empty()) PORTKIT_RETURN_IF_ERROR(CheckToolchainRan(report.session, o.compiler));
  report.accounting = Accounting(report.session);
  report.totals = Totals(report.session);
  report.timings.total_seconds = SecondsSince(start);
  return report;
}

Expected<BankListing> RunBankList(const fs::path& bank, int64_t max_string_bytes) {
  auto kb = KnowledgeBase::Open(bank, BankAccess::kReadOnly, max_string_bytes);
  if (!kb.ok()) return kb.status();
  std::vector<std::string> left_out;
  auto entries = kb->List(&left_out);
  if (!entries.ok()) return entries.status();
  return BankListing{kb->path(), kb->schema_version(), std::move(*entries), std::move(left_out)};
}

Expected<BankListing> RunBankShow(const fs::path& bank, const std::string& op, int64_t max_string_bytes) {
  auto all = RunBankList(bank, max_string_bytes);
  if (!all.ok()) return all.status();
  BankListing shown{all->path, all->schema_version, {}, all->left_out};
  for (auto& e : all->entries)
    if (e.op_key == op || e.op_name == op || e.op_type == op) shown.entries.push_back(std::move(e));
  if (shown.entries.empty())
    return NotFound("no entry for '" + op + "' in " + shown.path.string() +
                    " (give an op_key, op_name or op_type as listed by `portkit tune bank list`)");
  return shown;
}

Expected<BankListing> RunBankExport(const fs::path& bank, int64_t max_string_bytes) {
  return RunBankList(bank, max_string_bytes);
}

Expected<BankImportReport> RunBankImport(const fs::path& bank, const fs::path& file) {
  auto text = ReadFile(file);
  if (!text.ok()) return text.status();
  auto entries = EntriesFromJson(*text, file.string());
  if (!entries.ok()) return entries.status();
  auto kb = KnowledgeBase::Open(bank, BankAccess::kReadWrite);
  if (!kb.ok()) return kb.status();
  BankImportReport out;
  out.path = kb->path();
  for (const auto& e : *entries) {
    if (std::string bad = CheckEntry(e, 0); !bad.empty()) {
      out.rejected.push_back(e.op_key + ": " + bad);
      continue;
    }
    auto st = kb->StoreIfBetter(e);
    if (!st.ok()) return st.status();
    (*st == StoreOutcome::kAdded ? out.added : *st == StoreOutcome::kUpdated ? out.updated : out.kept)++;
  }
  return out;
}

}  // namespace portkit::tune
