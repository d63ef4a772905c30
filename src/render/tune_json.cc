// `portkit tune --format json`: the whole TuneReport as one JSON object.
#include "core/json_writer.h"
#include "render/tune_json_parts.h"
#include "render/tune_render.h"

namespace portkit::render {

std::string TuneReportJson(const tune::TuneReport& r) {
  const tune::SessionResult& s = r.session;
  JsonWriter w;
  w.BeginObject();
  w.Key("portkit_tune_report").Int(1);
  w.Key("name").String(s.name);
  w.Key("input").String(r.input);
  w.Key("replay").Bool(r.replay);
  w.Key("input_left_out").BeginArray();
  for (const auto& note : r.input_left_out) w.String(note);
  w.EndArray();
  w.Key("strategy").String(s.strategy);
  w.Key("bank").BeginObject().Key("path").String(s.bank_path).Key("validators").String(s.validators).EndObject();
  w.Key("accounting")
      .BeginObject()
      .Key("add")
      .Int(r.accounting.add)
      .Key("hit")
      .Int(r.accounting.hit)
      .Key("update")
      .Int(r.accounting.update)
      .Key("reserved")
      .Int(r.accounting.reserved)
      .Key("unsatisfied")
      .Int(r.accounting.unsatisfied)
      .Key("total")
      .Int(r.accounting.total())
      .Key("untuned")
      .Int(r.accounting.untuned)
      .EndObject();
  w.Key("model")
      .BeginObject()
      .Key("baseline_ms")
      .Fixed(r.totals.baseline_ms, 6)
      .Key("result_ms")
      .Fixed(r.totals.result_ms, 6)
      .Key("improvement_percent")
      .Fixed(r.totals.improvement_percent(), 3)
      .EndObject();
  w.Key("operators").BeginArray();
  for (const auto& op : s.ops) {
    w.BeginObject();
    OpIdentity(w, op.op)
        .Key("count")
        .Int(op.op.count)
        .Key("signature")
        .String(op.signature)
        .Key("repo_status")
        .String(tune::RepoStatusName(op.status))
        .Key("source")
        .String(op.source)
        .Key("strategy")
        .String(op.config)
        .Key("before_us")
        .Fixed(op.before_us, 3)
        .Key("after_us")
        .Fixed(op.after_us, 3)
        .Key("evaluations")
        .Int(op.evaluations)
        .Key("stop_reason")
        .String(op.stop_reason)
        .EndObject();
  }
  w.EndArray();
  UntunedArray(w, "untuned", s.untuned);
  w.Key("files_written").BeginArray();
  for (const auto& f : r.files_written) w.String(f.string());
  w.EndArray();
  w.Key("timings")
      .BeginObject()
      .Key("load_seconds")
      .Fixed(r.timings.load_seconds, 3)
      .Key("tune_seconds")
      .Fixed(r.timings.tune_seconds, 3)
      .Key("total_seconds")
      .Fixed(r.timings.total_seconds, 3)
      .EndObject();
  w.EndObject();
  return w.str() + "\n";
}

}  // namespace portkit::render
