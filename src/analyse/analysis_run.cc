#include "analyse/analysis_run.h"

#include "analyse/target.h"
#include "analyse/walker.h"

namespace portkit::analyse {

Finding& RuleContext::Report(TSNode node, std::string op, std::string tip, Category category, Confidence confidence,
                             std::string_view rule) {
  Finding f;
  f.file = file;
  f.start_line = StartLine(node);
  f.end_line = EndLine(node);
  f.start_col = StartCol(node);
  f.end_col = EndCol(node);
  f.op = std::move(op);
  f.tip = std::move(tip);
  f.category = category;
  f.confidence = confidence;
  f.rule = std::string(rule);
  f.function = function;
  out_.push_back(std::move(f));
  return out_.back();
}

std::vector<std::string> ParameterNames(const PySyntax& syn, TSNode def, std::string_view src) {
  std::vector<std::string> names;
  TSNode params = ts_node_child_by_field_id(def, syn.f_parameters);
  if (ts_node_is_null(params)) return names;
  uint32_t count = ts_node_named_child_count(params);
  for (uint32_t i = 0; i < count; ++i) {
    TSNode p = ts_node_named_child(params, i);
    TSNode name_node{};
    switch (syn.Kind(p)) {
      case NodeKind::kIdentifier: name_node = p; break;
      case NodeKind::kTypedParameter:
      case NodeKind::kListSplatPattern:
      case NodeKind::kDictionarySplatPattern: name_node = ts_node_named_child(p, 0); break;
      case NodeKind::kDefaultParameter:
      case NodeKind::kTypedDefaultParameter: name_node = ts_node_child_by_field_id(p, syn.f_name); break;
      default: continue;
    }
    if (ts_node_is_null(name_node)) continue;
    std::string name(NodeText(name_node, src));
    while (!name.empty() && name.front() == '*') name.erase(0, 1);
    if (!name.empty()) names.push_back(std::move(name));
  }
  return names;
}

namespace {

/// Hands walker events to every rule and records what the project-level steps need.
class RuleDispatcher : public EventSink {
 public:
  RuleDispatcher(const std::vector<std::unique_ptr<Rule>>& rules, RuleContext& ctx, FileAnalysis& out)
      : rules_(rules), ctx_(ctx), out_(out) {}
  void Watch(const std::string& name) {
    const auto* watched = ctx_.data.watched_names;
    if (watched && watched->count(name)) out_.seen.insert(name);
  }
  void OnCall(const CallEvent& ev) override {
    for (const auto& q : ev.lookup) Watch(q);
    if (!ev.method.empty()) Watch("." + std::string(ev.method));
    std::string callee = CalledFunction(ev.callee);
    std::string class_name =
        ev.callee.kind == ValueKind::kUserClass && ev.callee.cls ? ev.callee.cls->QualifiedName() : std::string();
    if (!callee.empty() || !class_name.empty()) {
      out_.calls.push_back({ctx_.function, callee, class_name, ctx_.file, StartLine(ev.node), EndLine(ev.node)});
    }
    for (const auto& r : rules_) r->OnCall(ev, ctx_);
  }
  void OnAttribute(const AttributeEvent& ev) override {
    Watch(ev.qname);
    for (const auto& r : rules_) r->OnAttribute(ev, ctx_);
  }
  void OnString(const StringEvent& ev) override {
    Watch(ev.value);
    for (const auto& r : rules_) r->OnString(ev, ctx_);
  }
  void OnReference(const AttributeEvent& ev) override {
    if (!ev.qname.empty()) Watch(ev.qname);
    for (const auto& r : rules_) r->OnAttribute(ev, ctx_);
  }
  void OnFormattedString(const StringEvent& ev) override {
    for (const auto& r : rules_) r->OnString(ev, ctx_);
  }
  void OnImport(const AttributeEvent& ev) override {
    for (const auto& r : rules_) r->OnImport(ev, ctx_);
  }
  void OnFunction(const std::string& qualname, TSNode def) override {
    ctx_.function = qualname;
    if (!qualname.empty())
      out_.definitions.push_back({qualname, ctx_.file, StartLine(def), ParameterNames(ctx_.syntax, def, ctx_.source)});
  }
  void OnSubscriptAssign(TSNode assignment, TSNode target, const Value& base, const Value& index) override {
    for (const auto& r : rules_) r->OnSubscriptAssign(assignment, target, base, index, ctx_);
  }

 private:
  const std::vector<std::unique_ptr<Rule>>& rules_;
  RuleContext& ctx_;
  FileAnalysis& out_;
};

}  // namespace

std::vector<FileAnalysis> AnalyseFiles(LoadedProject& project, const RuleData& data, const RuleFactory& make_rules,
                                       ThreadPool& pool, Logger& log) {
  std::vector<FileAnalysis> results(project.py.size());
  Progress progress(log, project.stats.python_analysed);
  const Target* target = data.target;
  auto known = [target](const std::string& q) { return target && target->Known(q); };
  std::vector<std::unique_ptr<PythonParser>> parsers;  // for the trees a large project did not keep
  for (int i = 0; i < pool.size(); ++i) parsers.push_back(std::make_unique<PythonParser>());
  pool.ParallelFor(project.py.size(), [&](int worker, size_t i) {
    PyFile& f = project.py[i];
    if (!f.summary) return;
    progress.Start("Start analysis " + f.file->display + ".");
    {
      BigTreeGuard one_big_tree(project, f.parsed.source.size());
      const ParsedSource* parsed = TreeOf(project, f, *parsers[worker]);
      if (parsed) {
        std::vector<std::unique_ptr<Rule>> rules = make_rules();
        RuleContext rctx(project.syntax, parsed->source, f.file->display, data, results[i].findings);
        RuleDispatcher dispatcher(rules, rctx, results[i]);
        FileWalker walker(project.syntax, *parsed, *f.summary, project.index, known, dispatcher);
        walker.Run();
        if (walker.too_deep())
          log.Warning(f.file->display + ": expressions nested deeper than " + std::to_string(FileWalker::kMaxDepth) +
                      " levels; their innermost parts were not analysed");
      }
      ReleaseTree(project, f);
    }
    progress.Done("Analysis " + f.file->display + " complete.");
  });
  return results;
}

}  // namespace portkit::analyse
