#pragma once
/// Renderers of a CompareReport (accuracy/api.h): the CSV with the column names of the original
/// compare tool, the JSON, the self-contained HTML report and the console summary. Each returns
/// text; WriteCompareFiles writes the chosen ones atomically.
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "accuracy/api.h"
#include "core/atomic_file.h"
#include "core/status.h"

namespace portkit::render {

/// The shortest text that reads back as the same double, any magnitude (std::to_chars: 3e+38,
/// -3.4028234663852886e+38, 0.1); "nan", "inf", "-inf".
std::string FormatNumber(double v);
/// compare_result.csv: one row per tensor pair or unmatched operator, in execution order.
std::string CompareCsv(const accuracy::CompareReport& report);
/// compare_result_msprobe.csv: the rows in msprobe's compare layout (its column names, including
/// NPU/Bench Requires_grad, Requires_grad Consistent, Result, Err_message, NPU_Stack_Info and
/// Data_name; summary columns when the dumps hold statistics only), names as msprobe writes them.
std::string CompareMsprobeCsv(const accuracy::CompareReport& report);
/// compare_result.json: first divergence, verdict counts and every row with all metrics.
std::string CompareJson(const accuracy::CompareReport& report);
/// compare_report.html: 1 − cosine along execution order (SVG), the worst outputs, the first
/// divergence.
std::string CompareHtml(const accuracy::CompareReport& report);
/// The verdict table printed after a run.
std::string CompareConsoleSummary(const accuracy::CompareReport& report);
/// `name (phase, #index, stack; basis: evidence)` of the first divergence; empty when there is none.
std::string CompareDivergenceText(const accuracy::CompareReport& report);
/// "Precision drift starts at OP (phase, #index[, stack]): evidence. ... run with replay to localise
/// it." when the report's state is drift; "" otherwise.
std::string CompareDriftText(const accuracy::CompareReport& report);
/// What a run found, for the console: the first divergence, or why none is named although
/// tensors are judged No; shape changes and operators without counterpart. One line each.
std::vector<std::string> CompareConclusion(const accuracy::CompareReport& report);

/// The streamed forms of the renderers above: the same text, handed to `sink` in pieces of about
/// a megabyte (WriteCompareFiles writes a 100k-operator report without holding it whole); the
/// first error of the sink is returned.
Status CompareCsvTo(const accuracy::CompareReport& report, const ReportSet::Sink& sink);
Status CompareMsprobeCsvTo(const accuracy::CompareReport& report, const ReportSet::Sink& sink);
Status CompareJsonTo(const accuracy::CompareReport& report, const ReportSet::Sink& sink);
Status CompareHtmlTo(const accuracy::CompareReport& report, const ReportSet::Sink& sink);
/// Bytes a streamed renderer gathers before handing them to its sink.
inline constexpr size_t kPieceBytes = size_t{1} << 20;
/// Hands what `out` holds to `sink` once it is a piece's worth (whatever it holds when `last`) and
/// empties it, keeping its buffer: one buffer serves the whole document (a new one for each piece
/// leaves the heap fragmented, tens of megabytes for a 100k-row report).
template <typename Out>
Status FlushPiece(Out& out, const ReportSet::Sink& sink, bool last = false) {
  if (!last && out.size() < kPieceBytes) return Status::Ok();
  Status st = sink(out.str());
  out.Clear();
  return st;
}
inline Status FlushPiece(std::string& out, const ReportSet::Sink& sink, bool last = false) {
  if (!last && out.size() < kPieceBytes) return Status::Ok();
  Status st = sink(out);
  out.clear();
  return st;
}
/// The whole text a streamed renderer hands its sink, as one string.
std::string Collect(const std::function<Status(const ReportSet::Sink&)>& render);

struct CompareFiles {
  bool csv = true, json = true, html = true, msprobe = false;
};
/// Writes compare_result.csv / compare_result.json / compare_report.html into `dir` (created when
/// missing), each atomically.
Status WriteCompareFiles(const accuracy::CompareReport& report, const std::filesystem::path& dir,
                         const CompareFiles& files);

/// The overwrite policy of compare's reports (docs/safety.md, Outputs), checked before any work:
/// an existing file of a name the run writes is replaced only when it is a compare report (the
/// folder's `.compare.complete` lists it with its present size, or it begins as that report
/// begins: the CSV header, the JSON's first member, the HTML title) or with `force`; otherwise
/// kInvalidArgument naming the file. A marker that is not a regular file is refused too.
Status CheckCompareOutputs(const std::filesystem::path& dir, const CompareFiles& files, bool force);

}  // namespace portkit::render
