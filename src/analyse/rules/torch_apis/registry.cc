#include "analyse/rules/torch_apis/rules.h"

#include "analyse/target.h"

namespace portkit::analyse {

std::vector<std::unique_ptr<Rule>> MakeTorchApiRules() {
  std::vector<std::unique_ptr<Rule>> rules;
  rules.push_back(MakeApiSupportRule());
  rules.push_back(MakeUnknownReceiverRule());
  rules.push_back(MakeCudaSpecificRule());
  rules.push_back(MakeCustomCudaOpRule());
  rules.push_back(MakePrecisionAdviceRule());
  rules.push_back(MakePerformanceAdviceRule());
  rules.push_back(MakeThirdPartyApiRule());
  rules.push_back(MakeFp64UsageRule());
  return rules;
}

std::vector<std::unique_ptr<ProjectRule>> MakeTorchApiProjectRules() {
  std::vector<std::unique_ptr<ProjectRule>> rules;
  rules.push_back(MakeGlobalAdviceRule());
  return rules;
}

std::unordered_set<std::string> WatchedNames(const Target& target) {
  std::unordered_set<std::string> names;
  for (const auto& s : target.advice().suggest_use) {
    names.insert("." + s.api);
    names.insert(s.when_used.begin(), s.when_used.end());
  }
  for (const auto& g : target.advice().global) names.insert(g.key);
  return names;
}

namespace {

bool UnderPrefix(std::string_view qname, std::string_view prefix) {
  return !prefix.empty() && qname.size() >= prefix.size() && qname.compare(0, prefix.size(), prefix) == 0 &&
         (qname.size() == prefix.size() || qname[prefix.size()] == '.');
}

std::string_view LastName(std::string_view q) {
  size_t dot = q.rfind('.');
  return dot == std::string_view::npos ? q : q.substr(dot + 1);
}

}  // namespace

bool IsCudaApi(const Target& target, const std::string& qname) {
  for (const auto& prefix : target.cuda().api_prefixes)
    if (UnderPrefix(qname, prefix)) return true;
  for (const auto& api : target.cuda().apis)
    if (qname == api) return true;
  return false;
}

bool IsTargetApi(const Target& target, const std::string& qname) {
  const auto& facts = target.facts();
  if (UnderPrefix(qname, facts.python_module) || UnderPrefix(qname, facts.device_module)) return true;
  if (!facts.device_type.empty() && UnderPrefix(qname, "torch." + facts.device_type)) return true;
  if (qname.rfind("torch.", 0) != 0) return false;
  std::string_view last = LastName(qname);
  for (const auto& [cuda, method] : facts.renames.methods)
    if (last == method) return true;
  for (const auto& [cuda, attr] : facts.renames.attributes)
    if (last == attr) return true;
  return false;
}

const std::string* LibraryOp(const Target& target, const std::string& qname) {
  for (const auto& op : target.cuda().library_ops) {
    if (qname == op) return &op;
    // The same op under a submodule of its package: torchvision.ops.boxes.nms.
    size_t first = op.find('.');
    size_t second = first == std::string::npos ? first : op.find('.', first + 1);
    if (second == std::string::npos) continue;
    if (qname.size() > second && qname.compare(0, second + 1, op, 0, second + 1) == 0 &&
        LastName(qname) == LastName(op))
      return &op;
  }
  return nullptr;
}

}  // namespace portkit::analyse
