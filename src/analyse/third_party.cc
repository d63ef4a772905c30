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

std::vector<AffectedFunction> PropagateAffected(const std::vector<DefinitionRecord>& definitions,
                                                const std::vector<CallRecord>& calls,
                                                const std::vector<Finding>& findings,
                                                const std::multimap<std::string, std::string>& spellings_by_qualname) {
  // Nodes: every defined function.
  std::unordered_map<std::string, size_t> id;
  std::vector<const DefinitionRecord*> node;
  for (const auto& d : definitions) {
    if (id.emplace(d.qualname, node.size()).second) node.push_back(&d);
  }
  size_t n = node.size();
  std::vector<std::vector<size_t>> callees(n), callers(n);
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
  std::vector<std::set<Offence>> direct(n);
  for (const auto& f : findings) {
    Offence o;
    if (!OffenceOf(f, &o)) continue;
    auto it = id.find(f.function);
    if (it != id.end()) direct[it->second].insert(o);
  }
  // Tarjan's SCCs (iterative). SCCs come out callees-first, so one pass propagates.
  std::vector<long> index(n, -1), low(n, 0), comp(n, -1);
  std::vector<char> on_stack(n, 0);
  std::vector<size_t> stack;
  std::vector<std::vector<size_t>> sccs;
  long counter = 0;
  for (size_t root = 0; root < n; ++root) {
    if (index[root] >= 0) continue;
    std::vector<std::pair<size_t, size_t>> work{{root, 0}};
    while (!work.empty()) {
      auto& [v, next] = work.back();
      if (next == 0 && index[v] < 0) {
        index[v] = low[v] = counter++;
        stack.push_back(v);
        on_stack[v] = 1;
      }
      if (next < callees[v].size()) {
        size_t w = callees[v][next++];
        if (index[w] < 0) {
          work.push_back({w, 0});
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        std::vector<size_t> scc;
        size_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          comp[w] = static_cast<long>(sccs.size());
          scc.push_back(w);
        } while (w != v);
        sccs.push_back(std::move(scc));
      }
      size_t done = v;
      work.pop_back();
      if (!work.empty()) low[work.back().first] = std::min(low[work.back().first], low[done]);
    }
  }
  // APIs reachable from each SCC: its members' own plus those of the SCCs it calls. Only
  // (bucket, API) pairs propagate, not call sites, so the sets stay small on big libraries.
  std::vector<std::set<std::pair<Bucket, std::string>>> reach(sccs.size());
  for (size_t c = 0; c < sccs.size(); ++c) {
    for (size_t v : sccs[c]) {
      for (const auto& o : direct[v]) reach[c].emplace(o.bucket, o.api);
      for (size_t w : callees[v]) {
        size_t cw = static_cast<size_t>(comp[w]);
        if (cw != c) reach[c].insert(reach[cw].begin(), reach[cw].end());
      }
    }
  }
  // Witness paths: breadth-first over callers from the functions with a direct offence; once
  // from the real offences (unsupported, custom op without a target kernel), once from any (CUDA
  // calls that migrate rewrites, unknown APIs), so that a function reaching a real offence shows
  // the path to one.
  auto witness = [&](bool real_only) {
    std::vector<long> next_hop(n, -2);  // -1: has a direct offence; -2: not reached
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
  };
  std::vector<long> next_real = witness(true), next_any = witness(false);
  std::vector<AffectedFunction> out;
  for (size_t v = 0; v < n; ++v) {
    const auto& apis = reach[static_cast<size_t>(comp[v])];
    if (apis.empty()) continue;
    AffectedFunction a;
    a.qualname = node[v]->qualname;
    a.file = node[v]->file;
    a.line = node[v]->line;
    a.apis.assign(apis.begin(), apis.end());
    a.real = std::any_of(apis.begin(), apis.end(), [](const auto& p) { return IsRealOffence(p.first); });
    const std::vector<long>& next_hop = a.real ? next_real : next_any;
    long end = static_cast<long>(v);
    for (long h = end; h >= 0 && a.path.size() <= n; h = next_hop[static_cast<size_t>(h)]) {
      a.path.push_back(node[static_cast<size_t>(h)]->qualname);
      end = h;
    }
    for (const auto& o : direct[static_cast<size_t>(end)])
      if (!a.real || IsRealOffence(o.bucket)) a.offences.push_back(o);
    a.spellings.push_back(a.qualname);
    auto [b, e] = spellings_by_qualname.equal_range(a.qualname);
    for (auto it = b; it != e; ++it)
      if (it->second != a.qualname) a.spellings.push_back(it->second);
    std::sort(a.spellings.begin() + 1, a.spellings.end());
    a.spellings.erase(std::unique(a.spellings.begin(), a.spellings.end()), a.spellings.end());
    out.push_back(std::move(a));
  }
  std::sort(out.begin(), out.end(),
            [](const AffectedFunction& x, const AffectedFunction& y) { return x.qualname < y.qualname; });
  return out;
}

}  // namespace portkit::analyse
