#include "core/json_writer.h"
#include "render/compare_render.h"

namespace portkit::render {
using accuracy::CompareOp;
using accuracy::CompareReport;

std::string CompareJson(const CompareReport& report) {
  return Collect([&](const ReportSet::Sink& sink) { return CompareJsonTo(report, sink); });
}

Status CompareJsonTo(const CompareReport& report, const ReportSet::Sink& sink) {
  JsonWriter j;
  j.Reserve(kPieceBytes + 4096);
  j.BeginObject();
  j.Key("reference").String(report.reference).Key("target").String(report.target);
  j.Key("match").String(accuracy::MatchKeyName(report.match));
  auto op_json = [&](const std::optional<CompareOp>& op, const char* key) {
    j.Key(key);
    if (!op) {
      j.Null();
      return;
    }
    j.BeginObject()
        .Key("index")
        .Int(op->index)
        .Key("name")
        .String(op->name)
        .Key("phase")
        .String(op->phase)
        .Key("module")
        .String(op->module)
        .Key("stack")
        .String(op->stack)
        .Key("forward")
        .String(op->forward)
        .EndObject();
  };
  op_json(report.first_divergence, "first_divergence");
  j.Key("first_divergence_basis").String(report.first_divergence_basis);
  j.Key("first_divergence_evidence").String(report.first_divergence_evidence);
  op_json(report.first_mismatching_output, "first_mismatching_output");
  j.Key("divergence_state").String(accuracy::DivergenceStateName(report.divergence_state));
  op_json(report.drift_start, "drift_start");
  j.Key("drift_evidence").String(report.drift_evidence);
  j.Key("replayed_operators")
      .BeginObject()
      .Key("ok")
      .Int(static_cast<int64_t>(report.replay_ok))
      .Key("skipped")
      .Int(static_cast<int64_t>(report.replay_skipped))
      .EndObject();
  auto op_list = [&](const std::vector<CompareOp>& ops, const char* key) {
    j.Key(key).BeginArray();
    for (const auto& op : ops)
      j.BeginObject().Key("index").Int(op.index).Key("name").String(op.name).Key("phase").String(op.phase).EndObject();
    j.EndArray();
  };
  op_list(report.unmatched_target_ops, "unmatched_target_ops");
  op_list(report.unmatched_reference_ops, "unmatched_reference_ops");
  auto shapes = [&](const std::vector<std::vector<int64_t>>& list) {
    j.BeginArray();
    for (const auto& shape : list) {
      j.BeginArray();
      for (int64_t d : shape) j.Int(d);
      j.EndArray();
    }
    j.EndArray();
  };
  j.Key("shape_changes").BeginArray();
  for (const auto& sc : report.shape_changes) {
    j.BeginObject().Key("name").String(sc.target.name).Key("phase").String(sc.target.phase);
    j.Key("target_index").Int(sc.target.index).Key("reference_index").Int(sc.reference.index);
    j.Key("target_shapes");
    shapes(sc.target_shapes);
    j.Key("reference_shapes");
    shapes(sc.reference_shapes);
    j.EndObject();
  }
  j.EndArray();
  j.Key("unaligned_operators")
      .BeginObject()
      .Key("target")
      .Int(static_cast<int64_t>(report.unaligned_target_ops))
      .Key("reference")
      .Int(static_cast<int64_t>(report.unaligned_reference_ops))
      .EndObject();
  j.Key("verdicts").BeginObject();
  for (const auto& [v, n] : report.verdict_counts) j.Key(v).Int(static_cast<int64_t>(n));
  j.EndObject();
  j.Key("rows").BeginArray();
  // The metrics beyond the CSV's, and the count of identical inf/nan positions left out.
  static const char* const kExtra[] = {"RMSE",         "MeanAbsErr", "MeanRelErr",
                                       "KLDivergence", "MaxULPErr",  "SmallValueErrRatio"};
  PORTKIT_RETURN_IF_ERROR(report.ForEachRow([&](const accuracy::CompareRow& r) {
    j.BeginObject();
    j.Key("npu_name").String(r.target.name.empty() ? "N/A" : r.target.name);
    j.Key("bench_name").String(r.reference.name.empty() ? "N/A" : r.reference.name);
    j.Key("verdict").String(accuracy::VerdictName(r.verdict));
    j.Key("replay").Bool(r.replay);
    if (r.compared) {
      std::map<std::string, double> extra;
      for (const char* x : kExtra) {
        auto it = r.metrics.find(x);
        extra[x] = it != r.metrics.end() ? it->second : 0.0;
      }
      if (r.identical_nonfinite > 0) extra["IdenticalNonFinite"] = static_cast<double>(r.identical_nonfinite);
      for (const auto& [k, v] : extra) j.Key(k).Shortest(v);
      if (r.mismatched_elements > 0) j.Key("mismatched_elements").Int(static_cast<int64_t>(r.mismatched_elements));
    }
    if (r.from_statistics && !r.metrics.empty()) {
      j.Key("statistics").BeginObject();
      for (const auto& [k, v] : r.metrics) j.Key(k).Shortest(v);
      j.EndObject();
    }
    if (r.discrete) j.Key("discrete").Bool(true);
    if (r.negligible) j.Key("negligible").Bool(true);
    if (const std::string& fwd = report.TargetForward(r); !fwd.empty()) j.Key("forward").String(fwd);
    if (r.ulp_threshold) {
      auto ulp = r.metrics.find("MaxULPErr");
      j.Key("ulp_threshold").Shortest(*r.ulp_threshold);
      j.Key("ulp_within_threshold").Bool(ulp != r.metrics.end() && ulp->second <= *r.ulp_threshold);
    }
    j.Key("err_message").String(r.message);
    j.EndObject();
    return FlushPiece(j, sink);
  }));
  j.EndArray();
  j.EndObject();
  return FlushPiece(j, sink, true);
}

}  // namespace portkit::render
