#pragma once
/// The torch_apis rule family. Each rule lives in its own file; adding one is one line in
/// registry.cc.
#include <memory>
#include <unordered_set>
#include <vector>

#include "analyse/rule.h"

namespace portkit::analyse {

std::unique_ptr<Rule> MakeApiSupportRule();
std::unique_ptr<Rule> MakeUnknownReceiverRule();
std::unique_ptr<Rule> MakeCudaSpecificRule();
std::unique_ptr<Rule> MakeCustomCudaOpRule();
std::unique_ptr<Rule> MakePrecisionAdviceRule();
std::unique_ptr<Rule> MakePerformanceAdviceRule();
std::unique_ptr<Rule> MakeThirdPartyApiRule();
std::unique_ptr<Rule> MakeFp64UsageRule();
std::unique_ptr<ProjectRule> MakeGlobalAdviceRule();

/// Every per-file rule of the family, in report order.
std::vector<std::unique_ptr<Rule>> MakeTorchApiRules();
std::vector<std::unique_ptr<ProjectRule>> MakeTorchApiProjectRules();
/// The names (qualified APIs, `.method`s, strings) whose use the project rules ask about.
std::unordered_set<std::string> WatchedNames(const Target& target);

/// True for names under a CUDA-only prefix of the target (torch.cuda, torch.backends.cudnn...).
bool IsCudaApi(const Target& target, const std::string& qname);
/// True for the target's own APIs, from its facts: its Python module (torch_npu.*), its device
/// module and `torch.<device_type>.*`, and the target's device methods and attributes on torch
/// classes (torch.Tensor.npu, torch.nn.Module.npu, torch.Tensor.is_npu).
bool IsTargetApi(const Target& target, const std::string& qname);
/// The CUDA-backed library op (data/cuda/cuda_only.json `library_ops`) that `qname` names, or null.
const std::string* LibraryOp(const Target& target, const std::string& qname);

}  // namespace portkit::analyse
