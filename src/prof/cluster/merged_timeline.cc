// The merged timeline: every event of every rank in one Chrome-trace JSON, one process per rank
// (pid = rank, named "rank N"), each (process, thread) of the rank's own trace one thread of it,
// times shifted to the earliest rank's first event so ranks line up in true time. Flow ids are
// renumbered so two ranks' flows never join. Events are sorted by time.
#include <simdjson.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/json_writer.h"
#include "prof/cluster/cluster.h"
#include "prof/importers/chrome_trace.h"
#include "prof/json_stream.h"

namespace portkit::prof::cluster {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t' || s.back() == ','))
    s.remove_suffix(1);
  return s;
}

/// ns as µs with three decimals ("-12.345").
std::string Micros3(int64_t ns) {
  std::string sign = ns < 0 ? "-" : "";
  uint64_t v = ns < 0 ? static_cast<uint64_t>(-(ns + 1)) + 1 : static_cast<uint64_t>(ns);
  std::string frac = std::to_string(v % 1000);
  return sign + std::to_string(v / 1000) + "." + std::string(3 - frac.size(), '0') + frac;
}

struct OutEvent {
  int64_t ts;
  int64_t rank;
  uint64_t seq;
  std::string text;
};

class RankRewriter {
 public:
  RankRewriter(const RankTrace& trace, int64_t origin) : trace_(trace), origin_(origin) {}
  std::vector<OutEvent> events;
  uint64_t* next_flow_id = nullptr;

  void Rewrite(std::string_view text) {
    buffer_.assign(text);
    buffer_.append(simdjson::SIMDJSON_PADDING, ' ');
    simdjson::ondemand::document doc;
    simdjson::ondemand::object obj;
    if (parser_.iterate(buffer_.data(), text.size(), buffer_.size()).get(doc) || doc.get_object().get(obj)) return;
    // First pass: the fields that decide what to do.
    std::string ph, name, pid, tid, meta_name;
    int64_t ts = 0;
    bool has_ts = false;
    std::vector<std::pair<std::string, std::string>> fields;  // (key, raw value) in order
    for (auto f : obj) {
      std::string_view key;
      simdjson::ondemand::value v;
      if (f.unescaped_key().get(key) || f.value().get(v)) return;
      simdjson::ondemand::json_type type;
      if (v.type().get(type)) return;
      std::string_view raw;
      if (type == simdjson::ondemand::json_type::object) {
        simdjson::ondemand::object o;
        if (v.get_object().get(o) || o.raw_json().get(raw)) return;
        if (key == "args") {
          // Metadata names: args.name of process_name / thread_name.
          simdjson::padded_string again(raw);
          simdjson::ondemand::parser p2;
          simdjson::ondemand::document d2;
          simdjson::ondemand::object o2;
          if (!p2.iterate(again).get(d2) && !d2.get_object().get(o2)) {
            std::string_view n;
            if (!o2["name"].get_string().get(n)) meta_name.assign(n);
          }
        }
      } else if (type == simdjson::ondemand::json_type::array) {
        simdjson::ondemand::array a;
        if (v.get_array().get(a) || a.raw_json().get(raw)) return;
      } else {
        raw = Trim(v.raw_json_token());
      }
      if (key == "ph") {
        std::string_view s;
        if (v.get_string().get(s)) return;
        ph.assign(s);
      } else if (key == "name") {
        std::string_view s;
        if (!v.get_string().get(s)) name.assign(s);
      } else if (key == "pid") {
        pid.assign(raw);
      } else if (key == "tid") {
        tid.assign(raw);
      } else if (key == "ts") {
        int64_t ns;
        if (!ParseMicrosToNanos(raw, &ns)) return;
        ts = ns, has_ts = true;
      }
      fields.emplace_back(std::string(key), std::string(raw));
    }
    if (ph == "M") {
      if (name == "process_name") process_names_[pid] = meta_name;
      else if (name == "thread_name") thread_names_[pid + "/" + tid] = meta_name;
      return;  // replaced by the rank's own metadata
    }
    if (!has_ts) return;
    int64_t abs = trace_.base_ns + ts;
    int64_t thread = ThreadOf(pid, tid);
    std::string out = "{";
    bool first = true;
    auto add = [&](std::string_view key, std::string_view raw) {
      if (!first) out += ",";
      first = false;
      JsonWriter::AppendEscaped(out, key);  // quoted
      out += ":";
      out += raw;
    };
    for (const auto& [key, raw] : fields) {
      if (key == "pid") add(key, std::to_string(trace_.rank));
      else if (key == "tid") add(key, std::to_string(thread));
      else if (key == "ts") add(key, Micros3(abs - origin_));
      else if (key == "id" && (ph == "s" || ph == "f" || ph == "t")) add(key, std::to_string(FlowId(raw)));
      else add(key, raw);
    }
    if (pid.empty()) add("pid", std::to_string(trace_.rank));
    if (tid.empty()) add("tid", std::to_string(thread));
    out += "}";
    events.push_back({abs, trace_.rank, seq_++, std::move(out)});
  }

  /// The rank's metadata events: its process name and sort index, and one name per thread.
  void Metadata(std::vector<std::string>& out) const {
    auto meta = [&](const std::string& what, int64_t tid, const std::string& args) {
      out.push_back("{\"ph\":\"M\",\"name\":\"" + what + "\",\"pid\":" + std::to_string(trace_.rank) +
                    ",\"tid\":" + std::to_string(tid) + ",\"args\":" + args + "}");
    };
    std::string label = "rank " + std::to_string(trace_.rank);
    std::string escaped;
    JsonWriter::AppendEscaped(escaped, label);
    meta("process_name", 0, "{\"name\":" + escaped + "}");
    meta("process_sort_index", 0, "{\"sort_index\":" + std::to_string(trace_.rank) + "}");
    for (const auto& [key, id] : threads_) {
      auto slash = key.find('/');
      std::string pid = key.substr(0, slash), tid = key.substr(slash + 1);
      auto pn = process_names_.find(pid);
      auto tn = thread_names_.find(key);
      std::string text = (pn != process_names_.end() && !pn->second.empty() ? pn->second : "pid " + pid) + " / " +
                         (tn != thread_names_.end() && !tn->second.empty() ? tn->second : "tid " + tid);
      std::string esc;
      JsonWriter::AppendEscaped(esc, text);
      meta("thread_name", id, "{\"name\":" + esc + "}");
      meta("thread_sort_index", id, "{\"sort_index\":" + std::to_string(id) + "}");
    }
  }

 private:
  int64_t ThreadOf(const std::string& pid, const std::string& tid) {
    auto [it, added] = threads_.try_emplace(pid + "/" + tid, static_cast<int64_t>(threads_.size()) + 1);
    return it->second;
  }
  uint64_t FlowId(const std::string& raw) {
    auto [it, added] = flows_.try_emplace(raw, 0);
    if (added) it->second = (*next_flow_id)++;
    return it->second;
  }
  const RankTrace& trace_;
  int64_t origin_;
  uint64_t seq_ = 0;
  simdjson::ondemand::parser parser_;
  std::string buffer_;
  std::map<std::string, int64_t> threads_;  // "pid/tid" -> thread id in the rank's process
  std::unordered_map<std::string, uint64_t> flows_;
  std::unordered_map<std::string, std::string> process_names_, thread_names_;
};

}  // namespace

Expected<std::string> BuildMergedTimeline(const std::vector<std::filesystem::path>& files,
                                          const std::vector<RankTrace>& ranks, int64_t origin_ns, uint64_t* count) {
  std::vector<OutEvent> all;
  std::vector<std::string> metadata;
  uint64_t next_flow_id = 1;
  for (size_t i = 0; i < files.size(); ++i) {
    RankRewriter rw(ranks[i], origin_ns);
    rw.next_flow_id = &next_flow_id;
    StreamCallbacks cb;
    cb.on_event = [&](std::string_view text) { rw.Rewrite(text); };
    StreamStats stats;
    if (Status st = SplitTraceEvents(files[i].string(), cb, &stats); !st.ok()) return st;
    rw.Metadata(metadata);
    for (auto& e : rw.events) all.push_back(std::move(e));
  }
  std::sort(all.begin(), all.end(), [](const OutEvent& a, const OutEvent& b) {
    return std::tie(a.ts, a.rank, a.seq) < std::tie(b.ts, b.rank, b.seq);
  });
  if (count) *count = all.size();
  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"origin_ns\":" + std::to_string(origin_ns) +
                    ",\"ranks\":" + std::to_string(ranks.size()) + "},\"traceEvents\":[\n";
  bool first = true;
  for (const auto& m : metadata) {
    if (!first) out += ",\n";
    first = false;
    out += m;
  }
  for (const auto& e : all) {
    if (!first) out += ",\n";
    first = false;
    out += e.text;
  }
  out += "\n]}\n";
  return out;
}

}  // namespace portkit::prof::cluster
