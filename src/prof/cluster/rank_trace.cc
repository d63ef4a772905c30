// Reading one rank's Kineto trace: the device tasks, their launches, the steps and the
// collective arguments; nothing else is kept (the merged timeline streams the file again).
#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "prof/cluster/cluster.h"
#include "prof/importers/chrome_trace.h"
#include "prof/importers/importer.h"
#include "prof/json_stream.h"

namespace portkit::prof::cluster {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

/// HTA's `^nccl.*Kernel`, plus ROCm's rccl, plus the names the target's data marks as
/// communication (profile.communication_kernels: HCCL's `hcom_` tasks on the NPU).
bool IsCommName(std::string_view name, const std::vector<std::string>& markers) {
  if (StartsWith(name, "nccl") || StartsWith(name, "rccl")) return name.find("Kernel", 4) != std::string_view::npos;
  for (const auto& m : markers)
    if (!m.empty() && name.find(m) != std::string_view::npos) return true;
  return false;
}

/// Whether an event with a stream field is device time: Kineto's kernel / gpu_memcpy / gpu_memset
/// (Kernel / Memcpy / Memset in PyTorch 1.8-1.9), or an event without a category (torch_npu's
/// "Ascend Hardware" tasks). Host events that carry a stream (Triton and torch.compile launchers
/// are cpu_op or python_function events with args.stream) are not.
bool IsDeviceCategory(std::string_view cat) {
  if (cat.empty()) return true;
  std::string lower(cat);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower == "kernel" || lower == "gpu_memcpy" || lower == "gpu_memset" || lower == "memcpy" || lower == "memset";
}

/// ProfilerStep#N ranges: cpu_op or user_annotation (torch 1.10+), Operator (torch 1.8-1.9),
/// none (the legacy profiler, torch_npu).
bool IsStepCategory(std::string_view cat) {
  return cat == "cpu_op" || cat == "user_annotation" || cat == "Operator" || cat.empty();
}

TaskClass ClassOf(std::string_view name, bool has_collective_args, const std::vector<std::string>& markers) {
  if (has_collective_args || IsCommName(name, markers)) return TaskClass::kCommunication;
  if (StartsWith(name, "Memcpy") || StartsWith(name, "Memset") || StartsWith(name, "dma")) return TaskClass::kMemory;
  // HTA leaves names holding Memcpy or Sync out of computation (stream and event syncs).
  if (name.find("Memcpy") != std::string_view::npos || name.find("Sync") != std::string_view::npos)
    return TaskClass::kOther;
  return TaskClass::kCompute;
}

/// The collective's operation from a kernel name: ncclKernel_AllReduce_RING_LL_Sum_float(...) →
/// AllReduce; ncclDevKernel_SendRecv(...) → SendRecv.
std::string OpFromKernelName(std::string_view name) {
  auto us = name.find('_');
  if (us == std::string_view::npos) return std::string(name.substr(0, name.find('(')));
  auto rest = name.substr(us + 1);
  auto end = rest.find_first_of("_(");
  return std::string(rest.substr(0, end));
}

int64_t IntValue(simdjson::ondemand::value v) {
  int64_t i;
  if (!v.get_int64().get(i)) return i;
  double d;
  if (!v.get_double().get(d) && d > -9e18 && d < 9e18) return static_cast<int64_t>(d);
  std::string_view s;
  if (!v.get_string().get(s)) {
    int64_t out = 0;
    bool any = false;
    for (char c : s) {
      if (c < '0' || c > '9') return -1;
      if (out > 922337203685477580) return -1;
      out = out * 10 + (c - '0');
      any = true;
    }
    return any ? out : -1;
  }
  return -1;
}

std::string StringOrRaw(simdjson::ondemand::value v) {
  std::string_view s;
  if (!v.get_string().get(s)) return std::string(s);
  simdjson::ondemand::array arr;
  std::string_view raw;
  if (!v.get_array().get(arr) && !arr.raw_json().get(raw)) return std::string(raw);
  return {};
}

struct PendingTask {
  DeviceTask task;
  int64_t ts_rel = 0, dur = 0;
  bool comm_args = false;
};

class RankReader {
 public:
  Status status;
  std::vector<std::string> names;
  std::unordered_map<std::string, int32_t> name_ids;
  std::vector<PendingTask> tasks;
  std::vector<CollectiveArgs> task_args;              // parallel to tasks (empty op when none)
  std::vector<std::pair<int64_t, int64_t>> launches;  // (correlation, ts) of host events
  std::vector<RankStep> steps;                        // relative times until Finish
  int64_t first = INT64_MAX, last = INT64_MIN;
  uint64_t events = 0;
  uint64_t host_with_stream = 0;  // host events carrying a stream field (launchers): not device time
  const std::vector<std::string>* communication_kernels = nullptr;

  void Parse(std::string_view text) {
    buffer_.assign(text);
    buffer_.append(simdjson::SIMDJSON_PADDING, ' ');
    simdjson::ondemand::document doc;
    simdjson::ondemand::object obj;
    if (parser_.iterate(buffer_.data(), text.size(), buffer_.size()).get(doc) || doc.get_object().get(obj)) return;
    // An event without a member must not see the previous event's (torch_npu's tasks have no cat).
    ph_.clear(), cat_.clear(), name_.clear();
    Fields f;
    if (!ReadMembers(obj, f)) return;
    if (ph_ != "X" || !f.has_ts || !TimesInRange(f.ts, f.dur)) return;
    ++events;
    first = std::min(first, f.ts);
    last = std::max(last, f.ts + f.dur);
    if (StartsWith(name_, "ProfilerStep#") && IsStepCategory(cat_)) {
      RankStep s;
      s.number = IntFromDigits(std::string_view(name_).substr(13));
      s.cpu_start = f.ts;
      s.cpu_end = f.ts + f.dur;
      steps.push_back(s);
    } else if (f.stream >= 0 && IsDeviceCategory(cat_)) {
      AddTask(f);
    } else if (f.correlation >= 0) {
      launches.emplace_back(f.correlation, f.ts);
    } else if (f.stream >= 0) {
      ++host_with_stream;
    }
  }

 private:
  /// The members of the event in hand that the analysis reads (besides ph_, cat_ and name_).
  struct Fields {
    int64_t ts = 0, dur = 0, stream = -1, correlation = -1;
    bool has_ts = false;
    bool comm_args = false;  // the args name a collective
    CollectiveArgs args;
  };

  /// Reads the members into `f`, ph_, cat_ and name_; false when the event is malformed.
  bool ReadMembers(simdjson::ondemand::object& obj, Fields& f) {
    std::string_view ph, cat, name;
    for (auto field : obj) {
      std::string_view key;
      simdjson::ondemand::value v;
      if (field.unescaped_key().get(key) || field.value().get(v)) return false;
      if (key == "ph") {
        if (v.get_string().get(ph)) return false;
        ph_.assign(ph);
      } else if (key == "cat") {
        if (!v.get_string().get(cat)) cat_.assign(cat);
      } else if (key == "name") {
        if (!v.get_string().get(name)) name_.assign(name);
      } else if (key == "ts" || key == "dur") {
        int64_t ns;
        if (!ParseMicrosToNanos(v.raw_json_token(), &ns)) return false;
        (key == "ts" ? f.ts : f.dur) = ns;
        f.has_ts |= key == "ts";
      } else if (key == "args") {
        ReadArgs(v, f);
      }
    }
    return true;
  }

  /// The stream, correlation and collective arguments of `args` (Kineto's names; torch_npu's
  /// "Stream Id" on Ascend Hardware tasks).
  static void ReadArgs(simdjson::ondemand::value v, Fields& f) {
    simdjson::ondemand::object a;
    if (v.get_object().get(a)) return;
    CollectiveArgs& args = f.args;
    for (auto field : a) {
      std::string_view k;
      simdjson::ondemand::value x;
      if (field.unescaped_key().get(k) || field.value().get(x)) break;
      if (k == "stream" || k == "Stream Id") f.stream = IntValue(x);  // Kineto / Ascend Hardware
      else if (k == "correlation") f.correlation = IntValue(x);
      else if (k == "Collective name") args.op = StringOrRaw(x), f.comm_args = true;
      else if (k == "In msg nelems") args.in_nelems = IntValue(x);
      else if (k == "Out msg nelems") args.out_nelems = IntValue(x);
      else if (k == "Group size") args.group_size = IntValue(x);
      else if (k == "dtype") args.dtype = StringOrRaw(x);
      else if (k == "Process Group Name") args.group = StringOrRaw(x);
      else if (k == "Process Group Ranks") args.group_ranks = StringOrRaw(x);
      else if (k == "Src Rank") args.src_rank = IntValue(x);
      else if (k == "Dst Rank") args.dst_rank = IntValue(x);
    }
  }

  /// A device task (an event with a stream and a device category), with its class.
  void AddTask(Fields& f) {
    PendingTask p;
    p.task.stream = f.stream;
    p.task.correlation = f.correlation;
    p.task.name = NameId(name_);
    p.task.cls = ClassOf(name_, f.comm_args, *communication_kernels);
    p.ts_rel = f.ts;
    p.dur = f.dur;
    p.comm_args = f.comm_args;
    CollectiveArgs& args = f.args;
    if (p.task.cls == TaskClass::kCommunication && args.op.empty()) args.op = OpFromKernelName(name_);
    if (p.task.cls == TaskClass::kCommunication) {
      std::string op = args.op;
      std::transform(op.begin(), op.end(), op.begin(), [](unsigned char c) { return std::tolower(c); });
      p.task.receive = op == "recv" || op == "irecv" || op == "receive";
    }
    tasks.push_back(p);
    task_args.push_back(p.task.cls == TaskClass::kCommunication ? std::move(args) : CollectiveArgs{});
  }

  static int64_t IntFromDigits(std::string_view s) {
    int64_t v = 0;
    for (char c : s) {
      if (c < '0' || c > '9' || v > 92233720368547758) break;
      v = v * 10 + (c - '0');
    }
    return v;
  }
  int32_t NameId(const std::string& n) {
    auto [it, added] = name_ids.try_emplace(n, static_cast<int32_t>(names.size()));
    if (added) names.push_back(n);
    return it->second;
  }
  simdjson::ondemand::parser parser_;
  std::string buffer_, ph_, cat_, name_;
};

/// distributedInfo: {"backend": "nccl", "rank": 0, "world_size": 2, ...}
void ReadDistributedInfo(std::string_view json, RankTrace& out, bool* has_rank) {
  simdjson::padded_string text(json);
  simdjson::ondemand::parser p;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object obj;
  if (p.iterate(text).get(doc) || doc.get_object().get(obj)) return;
  for (auto f : obj) {
    std::string_view k;
    simdjson::ondemand::value v;
    if (f.unescaped_key().get(k) || f.value().get(v)) return;
    if (k == "rank") {
      int64_t r = IntValue(v);
      if (r >= 0) out.rank = r, *has_rank = true;
    } else if (k == "world_size") {
      out.world_size = IntValue(v);
    } else if (k == "backend") {
      std::string_view s;
      if (!v.get_string().get(s)) out.backend.assign(s);
    }
  }
}

/// baseTimeNanoseconds as written (digits, white space around them) into out.base_ns.
Status ReadBaseTime(const std::string& text, const std::string& display, RankTrace& out) {
  int64_t base = 0;
  bool any = false;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c < '0' || c > '9' || base > 922337203685477580) {
      any = false;
      break;
    }
    base = base * 10 + (c - '0');
    any = true;
  }
  if (!any || base > kMaxTimestampNs)
    return ParseError(display + ": baseTimeNanoseconds is not a number of nanoseconds: " + text);
  out.has_base_time = true;
  out.base_ns = base;
  return Status::Ok();
}

/// The step of a task launched at `launched` (absolute ns): the step whose host window holds the
/// launch (HTA's iteration of a GPU kernel); -1 when none.
int32_t StepOfLaunch(const std::vector<RankStep>& steps, int64_t launched) {
  int32_t step = -1;
  for (size_t s = 0; s < steps.size(); ++s)
    if (steps[s].cpu_start <= launched && launched < steps[s].cpu_end) step = static_cast<int32_t>(s);
  return step;
}

/// The step of a task starting at `start` when no launches are recorded (Ascend): the last step
/// that started on the host before it; -1 when none.
int32_t StepOfStart(const std::vector<RankStep>& steps, int64_t start) {
  int32_t step = -1;
  for (size_t s = 0; s < steps.size() && steps[s].cpu_start <= start; ++s) step = static_cast<int32_t>(s);
  return step;
}

/// The device tasks of `reader` into out.tasks (absolute times, in start order, each with its
/// step) and the communication ones into out.comms. out.steps and out.base_ns are set.
void PlaceTasks(RankReader& reader, bool include_last_step, RankTrace& out) {
  const int64_t base = out.base_ns;
  // Launch time of each correlation id (host side), as HTA joins kernels to their launches.
  auto& launches = reader.launches;
  std::sort(launches.begin(), launches.end());
  auto launch_of = [&](int64_t corr) -> std::optional<int64_t> {
    auto it = std::lower_bound(launches.begin(), launches.end(), std::make_pair(corr, INT64_MIN));
    if (it == launches.end() || it->first != corr) return std::nullopt;
    return it->second + base;
  };
  // HTA drops device tasks that were not launched before the last step began (its last step is
  // taken as incomplete), when the trace has two or more steps.
  // Ascend traces (no correlation ids) keep every task and take their step from their start.
  const bool filter = out.steps.size() >= 2 && !launches.empty();
  int64_t last_start = 0, last_end = 0;
  for (const auto& s : out.steps)
    last_start = std::max(last_start, s.cpu_start), last_end = std::max(last_end, s.cpu_end);
  std::vector<size_t> order(reader.tasks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return reader.tasks[a].ts_rel < reader.tasks[b].ts_rel; });
  for (size_t i : order) {
    PendingTask& p = reader.tasks[i];
    DeviceTask t = p.task;
    t.start = base + p.ts_rel;
    t.end = t.start + p.dur;
    auto launched = p.task.correlation >= 0 ? launch_of(p.task.correlation) : std::nullopt;
    if (filter && !(launched && (include_last_step ? *launched <= last_end : *launched < last_start))) {
      ++out.excluded_tasks;
      continue;
    }
    if (launched) {
      if (int32_t step = StepOfLaunch(out.steps, *launched); step >= 0) t.step = step;
    } else if (launches.empty()) {
      if (int32_t step = StepOfStart(out.steps, t.start); step >= 0) t.step = step;
    }
    if (t.cls == TaskClass::kCommunication) out.comms.push_back({out.tasks.size(), std::move(reader.task_args[i])});
    out.tasks.push_back(t);
  }
}

}  // namespace

const char* TaskClassName(TaskClass c) {
  switch (c) {
    case TaskClass::kCompute: return "compute";
    case TaskClass::kCommunication: return "communication";
    case TaskClass::kMemory: return "memory";
    case TaskClass::kOther: return "other";
  }
  return "other";
}

int64_t RankFromFileName(const std::string& name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  int64_t found = -1;
  for (size_t at = lower.find("rank"); at != std::string::npos; at = lower.find("rank", at + 4)) {
    size_t i = at + 4;
    if (i < lower.size() && (lower[i] == '-' || lower[i] == '_' || lower[i] == '.')) ++i;
    if (i >= lower.size() || !std::isdigit(static_cast<unsigned char>(lower[i]))) continue;
    int64_t v = 0;
    while (i < lower.size() && std::isdigit(static_cast<unsigned char>(lower[i])) && v < 100000000)
      v = v * 10 + (lower[i++] - '0');
    found = v;  // the last "rank<N>" wins: folders may carry a job-level one first
  }
  return found;
}

Expected<RankTrace> ReadRankTrace(const std::filesystem::path& path, const std::string& display, int64_t rank_hint,
                                  bool include_last_step, const std::vector<std::string>& communication_kernels) {
  RankTrace out;
  out.file = display;
  RankReader reader;
  reader.communication_kernels = &communication_kernels;
  bool has_rank = false;
  std::string base_text;
  StreamCallbacks cb;
  cb.on_event = [&](std::string_view text) { reader.Parse(text); };
  cb.on_member = [&](std::string_view key, std::string_view value) {
    if (key == "distributedInfo") ReadDistributedInfo(value, out, &has_rank);
    else if (key == "baseTimeNanoseconds") base_text.assign(value);
  };
  StreamStats stats;
  if (Status st = SplitTraceEvents(path.string(), cb, &stats); !st.ok()) return st;
  if (stats.truncated && reader.events == 0)
    return ParseError(display + ": corrupt trace, no complete event before the damage (" + stats.stop_reason + ")");
  out.truncated = stats.truncated;
  out.bytes = stats.bytes_read;
  out.events = reader.events;
  if (!has_rank) {
    // As HTA: a trace that names no rank is rank 0 (noted in the report).
    out.rank = rank_hint < 0 ? 0 : rank_hint;
    out.rank_source = rank_hint < 0 ? RankSource::kAssumedZero : RankSource::kFileName;
  }
  out.host_with_stream = reader.host_with_stream;
  {
    std::string head = ReadFirstBytes(path);
    out.relative_clock = LooksLikeEventArray(head) && !HasStringTimestamp(head);
  }
  if (!base_text.empty()) PORTKIT_RETURN_IF_ERROR(ReadBaseTime(base_text, display, out));
  if (reader.events == 0) return ParseError(display + ": the trace has no timed event");
  const int64_t base = out.base_ns;
  // Absolute times stay within ±kMaxTimestampNs, so any difference between ranks fits in int64.
  if (base + reader.first < -kMaxTimestampNs || base + reader.last > kMaxTimestampNs)
    return ParseError(display + ": absolute timestamps (baseTimeNanoseconds + ts) beyond the year 2096");
  out.first_ns = base + reader.first;
  out.last_ns = base + reader.last;
  out.names = std::move(reader.names);

  std::sort(reader.steps.begin(), reader.steps.end(),
            [](const RankStep& a, const RankStep& b) { return a.cpu_start < b.cpu_start; });
  for (auto& s : reader.steps) s.cpu_start += base, s.cpu_end += base;
  out.steps = std::move(reader.steps);
  PlaceTasks(reader, include_last_step, out);
  return out;
}

int64_t CommTask::Bytes() const {
  int64_t n = std::max(args.in_nelems, args.out_nelems);
  if (n < 0 || args.dtype.empty()) return -1;
  std::string d(args.dtype);
  std::transform(d.begin(), d.end(), d.begin(), [](unsigned char c) { return std::tolower(c); });
  if (StartsWith(d, "torch.")) d = d.substr(6);
  int64_t size = -1;
  if (d == "float" || d == "float32" || d == "int" || d == "int32" || d == "uint32") size = 4;
  else if (d == "double" || d == "float64" || d == "long" || d == "int64" || d == "uint64" || d == "complexfloat")
    size = 8;
  else if (d == "half" || d == "float16" || d == "bfloat16" || d == "short" || d == "int16" || d == "uint16") size = 2;
  else if (d == "byte" || d == "char" || d == "bool" || d == "int8" || d == "uint8" || StartsWith(d, "float8"))
    size = 1;
  else if (d == "complexdouble") size = 16;
  if (size < 0 || n > INT64_MAX / size) return -1;
  return n * size;
}

}  // namespace portkit::prof::cluster
