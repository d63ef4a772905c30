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

bool IsCudaApi(const Target& target, const std::string& qname) {
  for (const auto& prefix : target.cuda().api_prefixes) {
    if (qname.size() >= prefix.size() && qname.compare(0, prefix.size(), prefix) == 0 &&
        (qname.size() == prefix.size() || qname[prefix.size()] == '.'))
      return true;
  }
  return false;
}

}  // namespace portkit::analyse
