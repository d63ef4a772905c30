#include "analyse/rules/affinity_apis/rules.h"

namespace portkit::analyse {

std::vector<std::unique_ptr<Rule>> MakeAffinityRules() {
  std::vector<std::unique_ptr<Rule>> rules;
  rules.push_back(MakeAffinityTorchRule());
  rules.push_back(MakeMaskIndexPutRule());
  rules.push_back(MakeRmsNormRule());
  rules.push_back(MakeRotaryRule());
  rules.push_back(MakeSwigluRule());
  rules.push_back(MakeAttentionRule());
  rules.push_back(MakeFusedOptimizerRule());
  return rules;
}

namespace affinity {

void Report(RuleContext& ctx, TSNode node, const std::string& name, const std::string& api_type,
            const std::string& replacement, std::string_view rule) {
  Finding& f = ctx.Report(node, name, replacement, Category::kAffinity, Confidence::kHigh, rule);
  f.api_type = api_type;
}

TSNode Parent(const PySyntax& syn, TSNode n) {
  TSNode p = ts_node_parent(n);
  while (!ts_node_is_null(p) && syn.Kind(p) == NodeKind::kParenthesizedExpression) p = ts_node_parent(p);
  return p;
}

std::string_view OperatorOf(TSNode n, std::string_view src) {
  uint32_t count = ts_node_child_count(n);
  for (uint32_t i = 0; i < count; ++i) {
    TSNode c = ts_node_child(n, i);
    if (!ts_node_is_named(c)) return NodeText(c, src);
  }
  return {};
}

bool ContainsCall(const PySyntax& syn, TSNode n, std::string_view src, std::string_view name) {
  bool found = false;
  ForEachNamedNode(n, [&](TSNode c) {
    if (found) return false;
    if (syn.Kind(c) == NodeKind::kCall) {
      std::string_view fn = NodeText(ts_node_child_by_field_id(c, syn.f_function), src);
      if (fn == name || (fn.size() > name.size() && fn.substr(fn.size() - name.size()) == name &&
                         fn[fn.size() - name.size() - 1] == '.'))
        found = true;
    }
    return !found;
  });
  return found;
}

bool ContainsOperator(const PySyntax& syn, TSNode n, std::string_view src, std::string_view op) {
  bool found = false;
  ForEachNamedNode(n, [&](TSNode c) {
    if (found) return false;
    if (syn.Kind(c) == NodeKind::kBinaryOperator && OperatorOf(c, src) == op) found = true;
    return !found;
  });
  return found;
}

bool IsCallOf(const CallEvent& ev, std::initializer_list<std::string_view> names) {
  for (const auto& q : ev.lookup)
    for (auto n : names)
      if (q == n) return true;
  return false;
}

}  // namespace affinity
}  // namespace portkit::analyse
