// Console text of `portkit tune` and `portkit tune bank`.
#include <cstdio>

#include "core/table.h"
#include "render/tune_render.h"

namespace portkit::render {
namespace {

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

std::string TuneTable(const tune::TuneReport& report) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& op : report.session.ops)
    rows.push_back({op.op.name, op.op.type, tune::RepoStatusName(op.status), Fmt("%.2f", op.before_us),
                    Fmt("%.2f", op.after_us),
                    tune::Percent(op.before_us > 0 ? (op.before_us - op.after_us) / op.before_us * 100 : 0),
                    std::to_string(op.evaluations)});
  for (const auto& u : report.session.untuned) rows.push_back({u.op.name, u.op.type, "untuned", "-", "-", "-", "0"});
  return RenderTable({"operator", "type", "repo", "before us", "after us", "gain", "evals"}, rows);
}

std::string TuneSummaryLine(const tune::TuneReport& report) {
  return "Aoe process finished, model performance " + Fmt("%.3f", report.totals.baseline_ms) + " ms -> " +
         Fmt("%.3f", report.totals.result_ms) + " ms, improvement " +
         tune::Percent(report.totals.improvement_percent()) + ".";
}

std::string BankListText(const tune::BankListing& listing) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : listing.entries)
    rows.push_back({e.op_type, e.op_name, e.op_key, Fmt("%.2f", e.time_us), Fmt("%.2f", e.default_us), e.config});
  std::string out = RenderTable({"type", "name", "signature", "us", "default us", "strategy"}, rows);
  out += std::to_string(listing.entries.size()) + " entries in " + listing.path.string();
  if (listing.schema_version == 0)
    out += " (written before schema versions; the next `portkit tune` with this bank migrates it)";
  return out + "\n";
}

std::string BankShowText(const tune::BankListing& listing) {
  std::string out;
  for (const auto& e : listing.entries) {
    double gain = e.default_us > 0 ? (e.default_us - e.time_us) / e.default_us * 100 : 0;
    out += "op_key:     " + e.op_key + "\nop_name:    " + e.op_name + "\nop_type:    " + e.op_type +
           "\nstrategy:   " + e.config + "\ntime:       " + Fmt("%.3f", e.time_us) + " us (default " +
           Fmt("%.3f", e.default_us) + " us, " + tune::Percent(gain) + " faster)\nvalidators: " + e.validators +
           "\nupdated:    " + e.updated + "\n\n";
  }
  return out;
}

std::string BankImportText(const tune::BankImportReport& r, const std::string& file) {
  std::string out = "Imported " + file + " into " + r.path.string() + ": " + std::to_string(r.added) + " added, " +
                    std::to_string(r.updated) + " updated (faster imported entries), " + std::to_string(r.kept) +
                    " kept (not faster, or measured here), " + std::to_string(r.rejected.size()) +
                    " refused; imported entries are marked not measured here until REPEAT_TUNE re-measures them.";
  for (const auto& why : r.rejected) out += "\n  refused " + why;
  return out;
}

}  // namespace portkit::render
