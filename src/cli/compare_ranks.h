#pragma once
/// `portkit compare` on dumps of many ranks: REF and TARGET each hold one dump folder per rank
/// (`rank0/`, `rank1/`, ... as msprobe's `stepN/` folders and the dumper's msprobe config lay them
/// out). Each rank pair is compared on its own into `-o/<rank>/`, and `-o/compare_ranks.csv` sums
/// them up. Under `mpirun -np N` process p compares the ranks p, p + N, p + 2N, ... (the MPI
/// mechanism of `prof cluster`); process 0 prints every rank's output in rank order and writes the
/// summary, so the files are the same, byte for byte, whatever N.
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/status.h"

namespace portkit::prof::cluster {
class Exchange;
}

namespace portkit::cli {

/// One rank's pair of dump folders.
struct RankDumps {
  std::string name;  ///< the folder name, `rank3` (the same on both sides)
  std::filesystem::path reference, target;
};

/// The rank folders of `reference` and `target`: empty when either is a dump itself (a
/// manifest.jsonl or a dump.json; a plain compare); otherwise the subfolders named `rank` or
/// `rank<N>` that hold a dump, paired by name and ordered by rank number. kInvalidArgument naming
/// the folder when only one side holds rank folders, or when a rank has no counterpart.
Expected<std::vector<RankDumps>> FindRankDumps(const std::filesystem::path& reference,
                                               const std::filesystem::path& target);

/// What one rank's compare left for the summary and the console.
struct RankOutcome {
  int code = 0;                            ///< the exit code the compare of this pair alone would have had
  std::string table;                       ///< what it printed on stdout
  std::string log;                         ///< what it logged (stderr lines, with their prefixes)
  std::string first_divergence;            ///< `name (phase, #index, ...)`, empty when none
  std::map<std::string, size_t> verdicts;  ///< rows per verdict name
};

/// Compares one rank pair, writing its reports into `out`; `ctx` logs into the rank's own log.
using CompareOneRank =
    std::function<RankOutcome(const RankDumps& rank, const std::filesystem::path& out, Context& ctx)>;

/// The file compare writes beside the rank folders.
inline constexpr const char* kRankSummaryFile = "compare_ranks.csv";

/// Runs `compare_one` for this process's share of `ranks` (all of them in one process; `exchange`
/// is prof cluster's: MPI's processes under mpirun), gathers
/// the outcomes on process 0, which prints them in rank order and writes `out/compare_ranks.csv`
/// (`Rank,Yes,No,N/A,Unmatched,First divergence,Exit code`), and returns the run's exit code on
/// every process: the highest of the ranks' codes.
int CompareRanks(const std::vector<RankDumps>& ranks, const std::filesystem::path& out,
                 prof::cluster::Exchange& exchange, const CompareOneRank& compare_one, Context& ctx);

}  // namespace portkit::cli
