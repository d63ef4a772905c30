// The tuning session's result files: AOE's `aoe_result_opat_*.json` and tuned_plan.json.
#include <cstdio>
#include <ctime>

#include "core/json_writer.h"
#include "render/tune_json_parts.h"
#include "render/tune_render.h"

namespace portkit::render {
namespace {

using tune::OpResult;
using tune::RepoStatus;

void OpObject(JsonWriter& w, const OpResult& op) {
  w.BeginObject();
  OpIdentity(w, op.op)
      .Key("performance_before_tune(us)")
      .Fixed(op.before_us, 3)
      .Key("performance_after_tune(us)")
      .Fixed(op.after_us, 3)
      .Key("performance_improvement")
      .String(tune::Percent(op.before_us > 0 ? (op.before_us - op.after_us) / op.before_us * 100 : 0))
      .EndObject();
}

}  // namespace

std::string TuneResultJson(const tune::SessionResult& r, std::string_view state, std::string_view failure) {
  tune::ModelTotals t = tune::Totals(r);
  tune::RepoAccounting a = tune::Accounting(r);
  JsonWriter w;
  w.BeginObject();
  w.Key("basic").BeginObject().Key("tuning_name").String(r.name).Key("tuning_time(s)").Fixed(r.seconds, 3);
  w.Key("strategy").String(r.strategy).EndObject();
  w.Key("OPAT").BeginObject();
  w.Key("model_baseline_performance(ms)").Fixed(t.baseline_ms, 6);
  w.Key("model_performance_improvement").String(tune::Percent(t.improvement_percent()));
  w.Key("model_result_performance(ms)").Fixed(t.result_ms, 6);
  w.Key("opat_tuning_result")
      .String(!state.empty()  ? std::string(state)
              : r.ops.empty() ? "tuning failed"
                              : "tuning successful");
  if (!failure.empty()) w.Key("failure").String(std::string(failure));
  w.Key("repo_modified_operators").BeginObject();
  w.Key("add_repo_operators").BeginArray();
  for (const auto& op : r.ops)
    if (op.status == RepoStatus::kAdd) OpObject(w, op);
  w.EndArray();
  w.Key("update_repo_operators").BeginArray();
  for (const auto& op : r.ops)
    if (op.status == RepoStatus::kUpdate) OpObject(w, op);
  w.EndArray().EndObject();
  w.Key("repo_summary")
      .BeginObject()
      .Key("repo_add_num")
      .Int(a.add)
      .Key("repo_hit_num")
      .Int(a.hit)
      .Key("repo_reserved_num")
      .Int(a.reserved)
      .Key("repo_unsatisfied_num")
      .Int(a.unsatisfied)
      .Key("repo_update_num")
      .Int(a.update)
      .Key("total_num")
      .Int(a.total())
      .EndObject();
  w.Key("operators").BeginArray();
  for (const auto& op : r.ops) {
    w.BeginObject();
    OpIdentity(w, op.op)
        .Key("count")
        .Int(op.op.count)
        .Key("repo_status")
        .String(tune::RepoStatusName(op.status))
        .Key("performance_before_tune(us)")
        .Fixed(op.before_us, 3)
        .Key("performance_after_tune(us)")
        .Fixed(op.after_us, 3)
        .Key("strategy")
        .String(op.config)
        .Key("measured_here")
        .Bool(op.measured_here)
        .Key("evaluations")
        .Int(op.evaluations)
        .EndObject();
  }
  w.EndArray();
  UntunedArray(w, "untuned_operators", r.untuned);
  w.EndObject().EndObject();
  return w.str() + "\n";
}

std::string TunedPlanJson(const tune::SessionResult& r) {
  JsonWriter w;
  w.BeginObject().Key("model").String(r.name).Key("ops").BeginArray();
  for (const auto& op : r.ops) {
    w.BeginObject();
    OpIdentity(w, op.op)
        .Key("signature")
        .String(op.signature)
        .Key("strategy")
        .String(op.config)
        .Key("source")
        .String(op.source)
        .Key("measured_here")
        .Bool(op.measured_here)
        .Key("time_us")
        .Fixed(op.after_us, 3)
        .EndObject();
  }
  w.EndArray();
  UntunedArray(w, "untuned", r.untuned);
  w.EndObject();
  return w.str() + "\n";
}

std::string TuneResultFileName(std::chrono::system_clock::time_point t, long pid) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d%H%M%S", &tm);
  return std::string("aoe_result_opat_") + buf + "_pid" + std::to_string(pid) + ".json";
}

}  // namespace portkit::render
