#pragma once
/// Renderers of the tuning engine's reports (src/tune/api.h): the AOE result file and
/// tuned_plan.json (tune_result.cc), the JSON report of `--format json` (tune_json.cc), and the
/// console text of `portkit tune` and `portkit tune bank` (tune_text.cc). Each returns text; the
/// CLI writes it (files atomically).
#include <chrono>
#include <string>
#include <string_view>

#include "tune/api.h"

namespace portkit::render {

/// The result file in AOE's form (`basic`, `OPAT` with the model figures, repo_modified_operators
/// and repo_summary) plus `operators` (every operator with its repo status, strategy and
/// evaluations) and `untuned_operators` with reasons. `state` is `opat_tuning_result`
/// ("tuning in progress" while the run goes on; default: "tuning successful", or "tuning failed"
/// when no operator was tuned); `failure`, when given, is written as `failure`.
std::string TuneResultJson(const tune::SessionResult& session, std::string_view state = {},
                           std::string_view failure = {});
/// tuned_plan.json: per operator its signature, chosen configuration, source and time.
std::string TunedPlanJson(const tune::SessionResult& session);
/// `aoe_result_opat_<YYYYmmddHHMMSS>_pid<pid>.json` for a local time.
std::string TuneResultFileName(std::chrono::system_clock::time_point t, long pid);

/// The whole report as one JSON object (`portkit_tune_report: 1`; see docs/tune.md).
std::string TuneReportJson(const tune::TuneReport& report);

/// The console table `operator | type | repo | before us | after us | gain | evals`.
std::string TuneTable(const tune::TuneReport& report);
/// `Aoe process finished, model performance A ms -> B ms, improvement X%.`
std::string TuneSummaryLine(const tune::TuneReport& report);

/// `portkit tune bank list`: a table of the entries and a count line.
std::string BankListText(const tune::BankListing& listing);
/// `portkit tune bank show`: every field of each entry.
std::string BankShowText(const tune::BankListing& listing);
/// `portkit tune bank import`: what the merge did.
std::string BankImportText(const tune::BankImportReport& report, const std::string& file);

}  // namespace portkit::render
