// What one rank reduces to (RankDigest) and its byte form for the trip between MPI processes:
// little-endian fixed-width integers and length-prefixed strings, in the order written here.
#include <cstring>
#include <unordered_map>

#include "prof/cluster/cluster.h"

namespace portkit::prof::cluster {
namespace {

class Writer {
 public:
  std::string out;
  void I(int64_t v) {
    uint64_t u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  }
  void S(std::string_view s) {
    I(static_cast<int64_t>(s.size()));
    out.append(s);
  }
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok = true;
  int64_t I() {
    if (in_.size() - at_ < 8 || at_ > in_.size()) return ok = false, 0;
    uint64_t u = 0;
    for (int i = 0; i < 8; ++i) u |= static_cast<uint64_t>(static_cast<unsigned char>(in_[at_ + i])) << (8 * i);
    at_ += 8;
    return static_cast<int64_t>(u);
  }
  std::string S() {
    int64_t n = I();
    if (!ok || n < 0 || static_cast<uint64_t>(n) > in_.size() - at_) return ok = false, std::string();
    std::string s(in_.substr(at_, static_cast<size_t>(n)));
    at_ += static_cast<size_t>(n);
    return s;
  }
  size_t Count() {  // a container size, bounded by what is left (each element takes ≥ 8 bytes)
    int64_t n = I();
    if (!ok || n < 0 || static_cast<uint64_t>(n) > (in_.size() - at_) / 8 + 1) return ok = false, 0;
    return static_cast<size_t>(n);
  }
  bool done() const { return at_ == in_.size(); }

 private:
  std::string_view in_;
  size_t at_ = 0;
};

void PutSplit(Writer& w, const TimeSplit& s) {
  for (int64_t v : {s.window, s.busy, s.compute, s.communication, s.memory, s.overlapped, s.receive, s.receive_exposed})
    w.I(v);
}
TimeSplit GetSplit(Reader& r) {
  TimeSplit s;
  for (int64_t* v :
       {&s.window, &s.busy, &s.compute, &s.communication, &s.memory, &s.overlapped, &s.receive, &s.receive_exposed})
    *v = r.I();
  return s;
}

}  // namespace

RankDigest DigestRank(size_t file_index, Expected<RankTrace> read) {
  RankDigest d;
  d.file_index = file_index;
  if (!read.ok()) {
    d.status = read.status();
    return d;
  }
  RankTrace& t = *read;
  d.breakdown = ComputeRankBreakdown(t);
  d.device_tasks = t.tasks.size();
  // Keep the communication tasks (and their names) only.
  std::vector<DeviceTask> tasks;
  std::vector<std::string> names;
  std::unordered_map<int32_t, int32_t> renamed;
  for (auto& c : t.comms) {
    DeviceTask task = t.tasks[c.task];
    auto [it, added] = renamed.try_emplace(task.name, static_cast<int32_t>(names.size()));
    if (added) names.push_back(t.names[static_cast<size_t>(task.name)]);
    task.name = it->second;
    c.task = tasks.size();
    tasks.push_back(task);
  }
  t.tasks = std::move(tasks);
  t.names = std::move(names);
  d.trace = std::move(t);
  return d;
}

std::string SerializeDigests(const std::vector<RankDigest>& digests) {
  Writer w;
  w.I(static_cast<int64_t>(digests.size()));
  for (const auto& d : digests) {
    w.I(static_cast<int64_t>(d.file_index));
    w.I(static_cast<int64_t>(d.status.code()));
    w.S(d.status.message());
    if (!d.status.ok()) continue;
    const RankTrace& t = d.trace;
    w.S(t.file);
    for (int64_t v :
         {t.rank, t.world_size, static_cast<int64_t>(t.rank_source), static_cast<int64_t>(t.has_base_time),
          static_cast<int64_t>(t.relative_clock), static_cast<int64_t>(t.host_with_stream), t.base_ns, t.first_ns,
          t.last_ns, static_cast<int64_t>(t.events), static_cast<int64_t>(t.bytes), static_cast<int64_t>(t.truncated),
          static_cast<int64_t>(t.excluded_tasks), static_cast<int64_t>(d.device_tasks)})
      w.I(v);
    w.S(t.backend);
    w.I(static_cast<int64_t>(t.names.size()));
    for (const auto& n : t.names) w.S(n);
    w.I(static_cast<int64_t>(t.tasks.size()));
    for (const auto& x : t.tasks)
      for (int64_t v : {x.start, x.end, x.stream, x.correlation, static_cast<int64_t>(x.name),
                        static_cast<int64_t>(x.cls), static_cast<int64_t>(x.receive), static_cast<int64_t>(x.step)})
        w.I(v);
    w.I(static_cast<int64_t>(t.comms.size()));
    for (const auto& c : t.comms) {
      w.I(static_cast<int64_t>(c.task));
      for (const std::string* s : {&c.args.op, &c.args.group, &c.args.group_ranks, &c.args.dtype}) w.S(*s);
      for (int64_t v : {c.args.in_nelems, c.args.out_nelems, c.args.group_size, c.args.src_rank, c.args.dst_rank})
        w.I(v);
    }
    w.I(static_cast<int64_t>(t.steps.size()));
    for (const auto& s : t.steps) w.I(s.number), w.I(s.cpu_start), w.I(s.cpu_end);
    const RankBreakdown& b = d.breakdown;
    w.I(b.rank);
    PutSplit(w, b.total);
    w.I(static_cast<int64_t>(b.steps.size()));
    for (const auto& s : b.steps) {
      w.I(s.step), w.I(s.start), w.I(s.end), w.I(s.preparing);
      PutSplit(w, s.split);
    }
  }
  return w.out;
}

Status DeserializeDigests(std::string_view bytes, std::vector<RankDigest>* out) {
  Reader r(bytes);
  size_t n = r.Count();
  for (size_t i = 0; i < n && r.ok; ++i) {
    RankDigest d;
    d.file_index = static_cast<size_t>(r.I());
    auto code = static_cast<ErrorCode>(r.I());
    std::string message = r.S();
    if (code != ErrorCode::kOk) {
      d.status = Status(code, message);
      out->push_back(std::move(d));
      continue;
    }
    RankTrace& t = d.trace;
    t.file = r.S();
    t.rank = r.I(), t.world_size = r.I();
    int64_t source = r.I();
    if (source < 0 || source > static_cast<int64_t>(RankSource::kAssumedZero)) r.ok = false;
    t.rank_source = static_cast<RankSource>(source);
    t.has_base_time = r.I() != 0;
    t.relative_clock = r.I() != 0;
    t.host_with_stream = static_cast<uint64_t>(r.I());
    t.base_ns = r.I(), t.first_ns = r.I(), t.last_ns = r.I();
    t.events = static_cast<uint64_t>(r.I()), t.bytes = static_cast<uint64_t>(r.I());
    t.truncated = r.I() != 0;
    t.excluded_tasks = static_cast<uint64_t>(r.I());
    d.device_tasks = static_cast<uint64_t>(r.I());
    t.backend = r.S();
    for (size_t k = 0, m = r.Count(); k < m && r.ok; ++k) t.names.push_back(r.S());
    for (size_t k = 0, m = r.Count(); k < m && r.ok; ++k) {
      DeviceTask x;
      x.start = r.I(), x.end = r.I(), x.stream = r.I(), x.correlation = r.I();
      x.name = static_cast<int32_t>(r.I());
      x.cls = static_cast<TaskClass>(r.I());
      x.receive = r.I() != 0;
      x.step = static_cast<int32_t>(r.I());
      t.tasks.push_back(x);
    }
    for (size_t k = 0, m = r.Count(); k < m && r.ok; ++k) {
      CommTask c;
      c.task = static_cast<size_t>(r.I());
      for (std::string* s : {&c.args.op, &c.args.group, &c.args.group_ranks, &c.args.dtype}) *s = r.S();
      for (int64_t* v : {&c.args.in_nelems, &c.args.out_nelems, &c.args.group_size, &c.args.src_rank, &c.args.dst_rank})
        *v = r.I();
      if (c.task >= t.tasks.size()) r.ok = false;
      t.comms.push_back(std::move(c));
    }
    for (size_t k = 0, m = r.Count(); k < m && r.ok; ++k) {
      RankStep s;
      s.number = r.I(), s.cpu_start = r.I(), s.cpu_end = r.I();
      t.steps.push_back(s);
    }
    for (const auto& x : t.tasks)
      if (x.name < 0 || static_cast<size_t>(x.name) >= t.names.size() || x.step >= static_cast<int32_t>(t.steps.size()))
        r.ok = false;
    RankBreakdown& b = d.breakdown;
    b.rank = r.I();
    b.total = GetSplit(r);
    for (size_t k = 0, m = r.Count(); k < m && r.ok; ++k) {
      StepSplit s;
      s.step = r.I(), s.start = r.I(), s.end = r.I(), s.preparing = r.I();
      s.split = GetSplit(r);
      b.steps.push_back(s);
    }
    out->push_back(std::move(d));
  }
  if (!r.ok || !r.done())
    return Status(ErrorCode::kInternal, "the rank summaries exchanged between processes are damaged");
  return Status::Ok();
}

}  // namespace portkit::prof::cluster
