// `portkit compare` on one dump folder per rank, in one process or split over mpirun's processes.
#include "cli/compare_ranks.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "cli/cli_common.h"
#include "core/atomic_file.h"
#include "core/csv_writer.h"
#include "core/output_policy.h"
#include "prof/cluster/cluster.h"

namespace portkit::cli {
namespace fs = std::filesystem;

namespace {

bool IsDumpFolder(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "manifest.jsonl", ec) || fs::is_regular_file(dir / "dump.json", ec);
}

/// The rank number of a folder named `rank` (none: -1, msprobe's name outside a distributed run)
/// or `rank<digits>`; nullopt for any other name.
std::optional<long long> RankNumber(const std::string& name) {
  if (name.rfind("rank", 0) != 0) return std::nullopt;
  std::string digits = name.substr(4);
  if (digits.empty()) return -1;
  if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(digits);
}

/// {rank number: folder name} of the rank folders of `dir` that hold a dump (links not followed).
Expected<std::map<long long, std::string>> RankFolders(const fs::path& dir) {
  std::map<long long, std::string> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    auto rank = RankNumber(name);
    if (!rank || it->is_symlink(ec) || !it->is_directory(ec) || !IsDumpFolder(it->path())) continue;
    auto [at, fresh] = found.emplace(*rank, name);
    if (!fresh)  // rank01 and rank1
      return InvalidArgument(dir.string() + ": two folders for rank " + std::to_string(*rank) + " (" + at->second +
                             ", " + name + "); keep one");
  }
  if (ec) return IoError(dir.string() + ": cannot list: " + ec.message());
  return found;
}

std::string Names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool Number(const std::string& s, size_t* n) {
  if (s.empty() || s.size() > 18 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  *n = std::stoull(s);
  return true;
}

// An outcome travels to process 0 as length-prefixed fields: `<bytes>:<text>` each.
void Put(std::string& out, const std::string& field) { out += std::to_string(field.size()) + ":" + field; }

bool Get(const std::string& in, size_t& at, std::string& field) {
  size_t colon = in.find(':', at);
  size_t n = 0;
  if (colon == std::string::npos || !Number(in.substr(at, colon - at), &n) || n > in.size() - colon - 1) return false;
  field = in.substr(colon + 1, n);
  at = colon + 1 + n;
  return true;
}

std::string Encode(size_t index, const RankOutcome& o) {
  std::string out;
  for (const std::string& f : {std::to_string(index), std::to_string(o.code), o.table, o.log, o.first_divergence,
                               std::to_string(o.verdicts.size())})
    Put(out, f);
  for (const auto& [verdict, n] : o.verdicts) Put(out, verdict), Put(out, std::to_string(n));
  return out;
}

/// The outcomes a process sent, by rank index; false when the bytes are not Encode's.
bool Decode(const std::string& in, std::map<size_t, RankOutcome>& into) {
  size_t at = 0;
  while (at < in.size()) {
    RankOutcome o;
    std::string index, code, count, verdict, n;
    size_t i = 0, c = 0, verdicts = 0, rows = 0;
    if (!Get(in, at, index) || !Get(in, at, code) || !Get(in, at, o.table) || !Get(in, at, o.log) ||
        !Get(in, at, o.first_divergence) || !Get(in, at, count) || !Number(index, &i) || !Number(code, &c) ||
        !Number(count, &verdicts))
      return false;
    for (size_t k = 0; k < verdicts; ++k) {
      if (!Get(in, at, verdict) || !Get(in, at, n) || !Number(n, &rows)) return false;
      o.verdicts[verdict] = rows;
    }
    o.code = static_cast<int>(c);
    into[i] = std::move(o);
  }
  return true;
}

}  // namespace

Expected<std::vector<RankDumps>> FindRankDumps(const fs::path& reference, const fs::path& target) {
  if (IsDumpFolder(reference) || IsDumpFolder(target)) return std::vector<RankDumps>{};
  auto refs = RankFolders(reference);
  if (!refs.ok()) return refs.status();
  auto tgts = RankFolders(target);
  if (!tgts.ok()) return tgts.status();
  if (refs->empty() && tgts->empty()) return std::vector<RankDumps>{};  // neither: RunCompare says what is wrong
  if (refs->empty() || tgts->empty()) {
    const fs::path& without = refs->empty() ? reference : target;
    const fs::path& with = refs->empty() ? target : reference;
    return InvalidArgument(without.string() + ": neither a dump (manifest.jsonl, dump.json) nor a folder of rank " +
                           "dumps (rank0/, rank1/, ...), while " + with.string() +
                           " holds rank folders; give both sides at the same level");
  }
  std::vector<std::string> only_ref, only_tgt;
  std::vector<RankDumps> pairs;
  for (const auto& [rank, name] : *refs) {
    auto it = tgts->find(rank);
    if (it == tgts->end()) only_ref.push_back(name);
    else pairs.push_back({name, reference / name, target / it->second});
  }
  for (const auto& [rank, name] : *tgts)
    if (!refs->count(rank)) only_tgt.push_back(name);
  if (!only_ref.empty() || !only_tgt.empty())
    return InvalidArgument("the ranks differ: " +
                           (only_ref.empty() ? std::string() : reference.string() + " alone has " + Names(only_ref)) +
                           (only_ref.empty() || only_tgt.empty() ? "" : "; ") +
                           (only_tgt.empty() ? std::string() : target.string() + " alone has " + Names(only_tgt)) +
                           "; compare dumps of the same ranks");
  return pairs;
}

int CompareRanks(const std::vector<RankDumps>& ranks, const fs::path& out, prof::cluster::Exchange& exchange,
                 const CompareOneRank& compare_one, Context& ctx) {
  const int process = exchange.process(), processes = exchange.processes();
  std::string mine;
  for (size_t i = static_cast<size_t>(process); i < ranks.size(); i += static_cast<size_t>(processes)) {
    // Each rank logs into its own quiet log: process 0 prints them all, in rank order.
    Logger log(nullptr, ctx.clock);
    Context rank_ctx{log, ctx.clock, ctx.data_dir, ctx.jobs, ctx.free_memory_at_end};
    RankOutcome outcome = compare_one(ranks[i], out / ranks[i].name, rank_ctx);
    outcome.log = log.Contents();
    mine += Encode(i, outcome);
  }
  auto gathered = exchange.GatherToRoot(mine);
  int code = kExitOk;
  if (process == 0) {
    std::map<size_t, RankOutcome> outcomes;
    if (!gathered.ok()) {
      code = Fail(ctx, gathered.status());
    } else {
      for (const auto& part : *gathered)
        if (!Decode(part, outcomes)) code = Fail(ctx, Status(ErrorCode::kInternal, "a process sent a damaged outcome"));
      if (code == kExitOk && outcomes.size() != ranks.size())
        code = Fail(ctx, Status(ErrorCode::kInternal, "outcomes of " + std::to_string(outcomes.size()) + " of " +
                                                          std::to_string(ranks.size()) + " ranks came back"));
    }
    if (code == kExitOk) {
      CsvWriter csv({"Rank", "Yes", "No", "N/A", "Unmatched", "First divergence", "Exit code"});
      for (const auto& [i, o] : outcomes) {
        std::fwrite(o.log.data(), 1, o.log.size(), stderr);
        std::string head = "== " + ranks[i].name + " ==\n";
        std::fwrite(head.data(), 1, head.size(), stdout);
        std::fwrite(o.table.data(), 1, o.table.size(), stdout);
        auto count = [&](const char* v) {
          auto it = o.verdicts.find(v);
          return std::to_string(it == o.verdicts.end() ? 0 : it->second);
        };
        csv.AddRow({ranks[i].name, count("Yes"), count("No"), count("N/A"), count("Unmatched"), o.first_divergence,
                    std::to_string(o.code)});
        code = std::max(code, o.code);
      }
      std::fflush(stdout);
      if (Status st = WriteFileAtomic(out / kRankSummaryFile, csv.str()); !st.ok())
        code = std::max(code, Fail(ctx, st));
      else if (Status st = RecordWritten(out, {kRankSummaryFile}); !st.ok()) code = std::max(code, Fail(ctx, st));
      else
        ctx.logger.Info(
            std::to_string(ranks.size()) + " ranks compared " +
            (processes == 1 ? std::string("in one process") : "with " + std::to_string(processes) + " MPI processes") +
            "; reports in " + out.string() + "/<rank>/, summary in " + (out / kRankSummaryFile).string());
    }
  }
  return processes > 1 ? exchange.Broadcast(code) : code;
}

}  // namespace portkit::cli
