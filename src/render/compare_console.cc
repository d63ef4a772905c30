#include <algorithm>
#include <map>
#include <sstream>
#include <system_error>

#include <unistd.h>

#include "core/atomic_file.h"
#include "core/input_files.h"
#include "core/output_policy.h"
#include "core/table.h"
#include "render/compare_render.h"

namespace portkit::render {
using accuracy::CompareReport;
using accuracy::Verdict;

std::string CompareConsoleSummary(const CompareReport& report) {
  std::vector<std::vector<std::string>> table;
  for (const auto& [v, n] : report.verdict_counts) table.push_back({v, std::to_string(n)});
  return RenderTable({"Accuracy Reached or Not", "tensors"}, table);
}

std::vector<std::string> CompareConclusion(const CompareReport& report) {
  std::vector<std::string> lines;
  std::string divergence = CompareDivergenceText(report);
  if (!divergence.empty()) {
    lines.push_back("First divergence: " + divergence);
  } else if (report.drift_start) {
    lines.push_back(CompareDriftText(report));
  } else if (report.HasMismatch()) {
    size_t no = report.verdict_counts.at(std::string(accuracy::VerdictName(Verdict::kNo)));
    size_t discrete = 0, inputs = 0;
    // A spill file that cannot be read back leaves the counts short; the reports say so first.
    (void)report.ForEachRow([&](const accuracy::CompareRow& r) {
      if (r.verdict != Verdict::kNo) return Status::Ok();
      discrete += r.output && r.discrete;
      inputs += !r.output && !r.replay;
      return Status::Ok();
    });
    std::string line = "No operator's own error found, but " + std::to_string(no) + " tensors are judged No";
    if (report.first_mismatching_output) {
      const auto& op = *report.first_mismatching_output;
      line += "; the first output judged No is " + op.name + " (" + op.phase + ", #" + std::to_string(op.index) +
              "), whose error its inputs already carry";
    } else {
      line += " (" + std::to_string(discrete) +
              " integer outputs of floating data, such as indices, which are not "
              "used to locate a culprit, and " +
              std::to_string(inputs) + " inputs)";
    }
    lines.push_back(line + ".");
  } else {
    lines.push_back("No diverging operator output.");
  }
  if (!report.shape_changes.empty()) {
    const auto& sc = report.shape_changes.front();
    std::string shapes;
    // The first shape change's row (a cancelled walk: shapes set).
    (void)report.ForEachRow([&](const accuracy::CompareRow& r) {
      if (r.target.name.empty() || r.reference.name.empty() || r.target_op >= 0) return Status::Ok();
      shapes = r.message;
      return Status(ErrorCode::kInternal, "found");
    });
    lines.push_back(std::to_string(report.shape_changes.size()) +
                    " operators changed their output shapes; the first is " + sc.target.name + " (#" +
                    std::to_string(sc.target.index) + ")" + (shapes.empty() ? "" : ": " + shapes) + ".");
  }
  if (!report.unmatched_target_ops.empty() || !report.unmatched_reference_ops.empty())
    lines.push_back(std::to_string(report.unmatched_target_ops.size()) + " target and " +
                    std::to_string(report.unmatched_reference_ops.size()) +
                    " reference operators have no counterpart (rows in execution order).");
  return lines;
}

namespace {
constexpr const char* kCompareMarker = ".compare.complete";
}  // namespace

Status CheckCompareOutputs(const std::filesystem::path& dir, const CompareFiles& files, bool force) {
  if (force) return Status::Ok();
  std::vector<std::string> names;
  if (files.csv) names.push_back("compare_result.csv");
  if (files.json) names.push_back("compare_result.json");
  if (files.html) names.push_back("compare_report.html");
  if (files.msprobe) names.push_back("compare_result_msprobe.csv");
  // What an earlier compare wrote: `name size` lines of its completion marker.
  std::map<std::string, uint64_t> written;
  std::error_code ec;
  const std::filesystem::path marker = dir / kCompareMarker;
  const std::string marker_type = DescribeFileType(marker);
  if (marker_type == "a regular file") {
    auto text = ReadFile(marker);
    if (text.ok()) {
      std::istringstream in(*text);
      std::string name;
      uint64_t size = 0;
      while (in >> name >> size) written[name] = size;
    }
  } else if (marker_type != "missing") {
    return InvalidArgument("-o " + dir.string() + ": " + marker.string() + " is " + marker_type +
                           ", not compare's completion marker; it is not replaced: give another -o, or --force");
  }
  // How each report begins: a file that begins so is a compare report (one a killed run renamed
  // before it could write the marker, say), whatever the marker says.
  auto begins_as_report = [](const std::filesystem::path& p, const std::string& name) {
    const std::string_view head =
        name == "compare_result.json" ? std::string_view("{\n  \"reference\": ")
        : name == "compare_report.html"
            ? std::string_view("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>portkit compare</title>")
            : std::string_view("NPU Name,Bench Name,NPU Dtype,Bench Dtype,");
    auto fd = OpenInputFile(p, Links::kRefuse);
    if (!fd.ok()) return false;
    std::string buf(head.size(), '\0');
    size_t got = 0;
    while (got < buf.size()) {
      const ssize_t n = ::read(fd->get(), buf.data() + got, buf.size() - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    return got == head.size() && buf == head;
  };
  const std::vector<std::string> ledger = WrittenFiles(dir);  // core/output_policy.h
  for (const auto& name : names) {
    const std::filesystem::path p = dir / name;
    const std::string type = DescribeFileType(p);
    if (type == "missing") continue;
    auto it = written.find(name);
    const bool ours =
        type == "a regular file" &&
        (std::find(ledger.begin(), ledger.end(), name) != ledger.end() ||
         (it != written.end() && std::filesystem::file_size(p, ec) == it->second && !ec) || begins_as_report(p, name));
    if (!ours)
      return InvalidArgument("-o " + dir.string() + ": " + p.string() + " exists (" + type +
                             ") and is not a compare report (not in the folder's " + std::string(kWrittenLedger) +
                             " nor listed with its size in " + marker.string() +
                             ", nor beginning as one); it is not replaced: give another -o, or --force to replace it");
  }
  return Status::Ok();
}

Status WriteCompareFiles(const CompareReport& report, const std::filesystem::path& dir, const CompareFiles& files) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError(dir.string() + ": cannot create: " + ec.message());
  // One set (docs/safety.md, Report sets): all staged first, then renamed, then the marker
  // `.compare.complete` written last; a crash in between leaves no marker.
  ReportSet set(dir, kCompareMarker);
  // The CSV and JSON are written as they are rendered: a 100k-operator report is never held whole.
  if (files.csv)
    PORTKIT_RETURN_IF_ERROR(
        set.AddStreamed("compare_result.csv", [&](const ReportSet::Sink& sink) { return CompareCsvTo(report, sink); }));
  if (files.json)
    PORTKIT_RETURN_IF_ERROR(set.AddStreamed("compare_result.json",
                                            [&](const ReportSet::Sink& sink) { return CompareJsonTo(report, sink); }));
  if (files.html)
    PORTKIT_RETURN_IF_ERROR(set.AddStreamed("compare_report.html",
                                            [&](const ReportSet::Sink& sink) { return CompareHtmlTo(report, sink); }));
  if (files.msprobe)
    PORTKIT_RETURN_IF_ERROR(set.AddStreamed(
        "compare_result_msprobe.csv", [&](const ReportSet::Sink& sink) { return CompareMsprobeCsvTo(report, sink); }));
  PORTKIT_RETURN_IF_ERROR(set.Publish());
  // The reports listed as portkit's in the folder's ledger (core/output_policy.h).
  std::vector<std::string> names;
  if (files.csv) names.push_back("compare_result.csv");
  if (files.json) names.push_back("compare_result.json");
  if (files.html) names.push_back("compare_report.html");
  if (files.msprobe) names.push_back("compare_result_msprobe.csv");
  return RecordWritten(dir, names);
}

}  // namespace portkit::render
