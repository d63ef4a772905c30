#include "analyse/third_party.h"

#include <algorithm>
#include <deque>
#include <set>

#include "core/csv_reader.h"

namespace portkit::analyse {

Expected<ThirdPartyApis> ThirdPartyApis::Load(const std::vector<std::string>& files) {
  ThirdPartyApis out;
  for (const auto& path : files) {
    auto rows = ReadCsvFile(path, 256u << 20);
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return ParseError(path + ":1: empty file; expected the header File,3rd-party API,Message");
    const auto& header = rows->front();
    auto col = [&](const char* name) -> long {
      auto it = std::find(header.begin(), header.end(), name);
      return it == header.end() ? -1 : it - header.begin();
    };
    long api = col("3rd-party API"), message = col("Message"), file = col("File");
    if (api < 0)
      return ParseError(path +
                        ":1: no '3rd-party API' column; give the full_unsupported_results.csv "
                        "of a third_party run");
    for (size_t r = 1; r < rows->size(); ++r) {
      const auto& row = (*rows)[r];
      if (row.size() == 1 && row[0].empty()) continue;
      if (row.size() != header.size())
        return ParseError(path + ": record " + std::to_string(r + 1) + ": " + std::to_string(row.size()) +
                          " fields, the header has " + std::to_string(header.size()));
      std::string evidence = message >= 0 ? row[static_cast<size_t>(message)] : "";
      if (file >= 0)
        evidence = "defined in " + row[static_cast<size_t>(file)] + (evidence.empty() ? "" : "\n" + evidence);
      std::string name = row[static_cast<size_t>(api)];
      if (!name.empty() && name.front() == '\'') name.erase(0, 1);  // CSV-injection guard
      if (!name.empty()) out.apis_.emplace(name, evidence);
    }
  }
  return out;
}

const std::string* ThirdPartyApis::Evidence(const std::string& qname) const {
  auto it = apis_.find(qname);
  return it == apis_.end() ? nullptr : &it->second;
}

bool IsRealOffence(Bucket b) { return b == Bucket::kFrameworkUnsupported || b == Bucket::kCudaOp; }

bool OffenceOf(const Finding& f, Offence* out) {
  if (f.function.empty()) return false;
  out->api = f.op;
  out->file = f.file;
  out->line = f.start_line;
  const std::string& op = f.op;
  auto starts = [&](const char* p) { return op.rfind(p, 0) == 0; };
  if (f.rule == "custom_cuda_op" && f.category == Category::kUnsupported && !starts("torch.")) {
    out->bucket = Bucket::kCudaOp;
    return true;
  }
  bool cuda_api = starts("torch.cuda") || op.find(".cuda") != std::string::npos ||
                  op.find(".mlu") != std::string::npos || op.find(".mps") != std::string::npos ||
                  starts("torch.backends.cudnn") || op == ".cuda()";
  if (f.category == Category::kCuda) {
    // Device strings and backends are not APIs; `.cuda()` on a receiver of unknown type is
    // CUDA-only code (unknown_receiver leaves it to cuda_specific).
    if (!cuda_api) return false;
    out->bucket = Bucket::kMigrationNeeded;
    return true;
  }
  if (f.category == Category::kUnsupported) {
    // A reference of an unsupported API (`self.clip = torch.nn.utils.clip_grad_norm`) is not a
    // call: the function does not reach the API by it (api_support marks them medium).
    if (f.rule == "api_support" && f.confidence == Confidence::kMedium) return false;
    out->bucket = cuda_api ? Bucket::kMigrationNeeded : Bucket::kFrameworkUnsupported;
    return true;
  }
  if (f.category == Category::kUnknown) {
    out->bucket = cuda_api ? Bucket::kMigrationNeeded : Bucket::kUnknown;
    return true;
  }
  return false;
}

namespace {

using Adjacency = std::vector<std::vector<size_t>>;
using ApiSet = std::set<std::pair<Bucket, std::string>>;

/// Every defined function a node; an edge for each call between two of them (sorted, unique).
struct CallGraph {
  std::unordered_map<std::string, size_t> id;
  std::vector<const DefinitionRecord*> node;
  Adjacency callees, callers;

  CallGraph(const std::vector<DefinitionRecord>& definitions, const std::vector<CallRecord>& calls) {
    for (const auto& d : definitions) {
      if (id.emplace(d.qualname, node.size()).second) node.push_back(&d);
    }
    callees.resize(node.size());
    callers.resize(node.size());
    for (const auto& c : calls) {
      auto a = id.find(c.caller), b = id.find(c.callee);
      if (a == id.end() || b == id.end()) continue;
      callees[a->second].push_back(b->second);
      callers[b->second].push_back(a->second);
    }
    for (auto* adj : {&callees, &callers})
      for (auto& v : *adj) {
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
      }
  }
};

/// Strongly connected components of the call graph, callees first; `comp` maps a node to its.
struct Components {
  std::vector<long> comp;
  std::vector<std::vector<size_t>> sccs;
};

/// Tarjan's SCCs, iterative (deep call chains must not overflow the stack).
class Tarjan {
 public:
  explicit Tarjan(const Adjacency& callees)
      : callees_(callees), index_(callees.size(), -1), low_(callees.size(), 0), on_stack_(callees.size(), 0) {
    out_.comp.assign(callees.size(), -1);
  }

  Components Run() && {
    for (size_t root = 0; root < callees_.size(); ++root)
      if (index_[root] < 0) Visit(root);
    return std::move(out_);
  }

 private:
  void Visit(size_t root) {
    std::vector<std::pair<size_t, size_t>> work{{root, 0}};
    while (!work.empty()) {
      auto& [v, next] = work.back();
      if (next == 0 && index_[v] < 0) {
        index_[v] = low_[v] = counter_++;
        stack_.push_back(v);
        on_stack_[v] = 1;
      }
      if (next < callees_[v].size()) {
        size_t w = callees_[v][next++];
        if (index_[w] < 0) {
          work.push_back({w, 0});
        } else if (on_stack_[w]) {
          low_[v] = std::min(low_[v], index_[w]);
        }
        continue;
      }
      if (low_[v] == index_[v]) PopComponent(v);
      size_t done = v;
      work.pop_back();
      if (!work.empty()) low_[work.back().first] = std::min(low_[work.back().first], low_[done]);
    }
  }

  void PopComponent(size_t v) {
    std::vector<size_t> scc;
    size_t w;
    do {
      w = stack_.back();
      stack_.pop_back();
      on_stack_[w] = 0;
      out_.comp[w] = static_cast<long>(out_.sccs.size());
      scc.push_back(w);
    } while (w != v);
    out_.sccs.push_back(std::move(scc));
  }

  const Adjacency& callees_;
  std::vector<long> index_, low_;
  std::vector<char> on_stack_;
  std::vector<size_t> stack_;
  long counter_ = 0;
  Components out_;
};

/// APIs reachable from each SCC: its members' own plus those of the SCCs it calls. Only
/// (bucket, API) pairs propagate, not call sites, so the sets stay small on big libraries.
std::vector<ApiSet> ReachableApis(const Components& c, const Adjacency& callees,
                                  const std::vector<std::set<Offence>>& direct) {
  std::vector<ApiSet> reach(c.sccs.size());
  for (size_t k = 0; k < c.sccs.size(); ++k) {
    for (size_t v : c.sccs[k]) {
      for (const auto& o : direct[v]) reach[k].emplace(o.bucket, o.api);
      for (size_t w : callees[v]) {
        size_t cw = static_cast<size_t>(c.comp[w]);
        if (cw != k) reach[k].insert(reach[cw].begin(), reach[cw].end());
      }
    }
  }
  return reach;
}

/// Witness paths: breadth-first over callers from the functions with a direct offence (only the
/// real ones when `real_only`). Each node's next hop towards one; -1: has a direct offence; -2:
/// not reached.
std::vector<long> WitnessHops(const Adjacency& callers, const std::vector<std::set<Offence>>& direct, bool real_only) {
  const size_t n = callers.size();
  std::vector<long> next_hop(n, -2);
  std::deque<size_t> queue;
  for (size_t v = 0; v < n; ++v)
    for (const auto& o : direct[v])
      if (!real_only || IsRealOffence(o.bucket)) {
        next_hop[v] = -1;
        queue.push_back(v);
        break;
      }
  while (!queue.empty()) {
    size_t v = queue.front();
    queue.pop_front();
    for (size_t u : callers[v])
      if (next_hop[u] == -2) next_hop[u] = static_cast<long>(v), queue.push_back(u);
  }
  return next_hop;
}

/// The qualified name first, then the other spellings of it, sorted, without repeats.
std::vector<std::string> SpellingsOf(const std::string& qualname,
                                     const std::multimap<std::string, std::string>& spellings_by_qualname) {
  std::vector<std::string> spellings{qualname};
  auto [b, e] = spellings_by_qualname.equal_range(qualname);
  for (auto it = b; it != e; ++it)
    if (it->second != qualname) spellings.push_back(it->second);
  std::sort(spellings.begin() + 1, spellings.end());
  spellings.erase(std::unique(spellings.begin(), spellings.end()), spellings.end());
  return spellings;
}

}  // namespace

std::vector<AffectedFunction> PropagateAffected(const std::vector<DefinitionRecord>& definitions,
                                                const std::vector<CallRecord>& calls,
                                                const std::vector<Finding>& findings,
                                                const std::multimap<std::string, std::string>& spellings_by_qualname) {
  const CallGraph graph(definitions, calls);
  const size_t n = graph.node.size();
  std::vector<std::set<Offence>> direct(n);
  for (const auto& f : findings) {
    Offence o;
    if (!OffenceOf(f, &o)) continue;
    auto it = graph.id.find(f.function);
    if (it != graph.id.end()) direct[it->second].insert(o);
  }
  // SCCs come out callees-first, so one pass propagates.
  const Components components = Tarjan(graph.callees).Run();
  const std::vector<ApiSet> reach = ReachableApis(components, graph.callees, direct);
  // Once from the real offences (unsupported, custom op without a target kernel), once from any
  // (CUDA calls that migrate rewrites, unknown APIs), so that a function reaching a real offence
  // shows the path to one.
  std::vector<long> next_real = WitnessHops(graph.callers, direct, true);
  std::vector<long> next_any = WitnessHops(graph.callers, direct, false);
  std::vector<AffectedFunction> out;
  for (size_t v = 0; v < n; ++v) {
    const auto& apis = reach[static_cast<size_t>(components.comp[v])];
    if (apis.empty()) continue;
    AffectedFunction a;
    a.qualname = graph.node[v]->qualname;
    a.file = graph.node[v]->file;
    a.line = graph.node[v]->line;
    a.apis.assign(apis.begin(), apis.end());
    a.real = std::any_of(apis.begin(), apis.end(), [](const auto& p) { return IsRealOffence(p.first); });
    const std::vector<long>& next_hop = a.real ? next_real : next_any;
    long end = static_cast<long>(v);
    for (long h = end; h >= 0 && a.path.size() <= n; h = next_hop[static_cast<size_t>(h)]) {
      a.path.push_back(graph.node[static_cast<size_t>(h)]->qualname);
      end = h;
    }
    for (const auto& o : direct[static_cast<size_t>(end)])
      if (!a.real || IsRealOffence(o.bucket)) a.offences.push_back(o);
    a.spellings = SpellingsOf(a.qualname, spellings_by_qualname);
    out.push_back(std::move(a));
  }
  std::sort(out.begin(), out.end(),
            [](const AffectedFunction& x, const AffectedFunction& y) { return x.qualname < y.qualname; });
  return out;
}

}  // namespace portkit::analyse
