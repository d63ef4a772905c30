#pragma once
/// A deployment target described by data (data/targets/<name>/): which torch APIs it supports for
/// a torch version, advice for precision and performance, and what counts as CUDA-only code.
#include <filesystem>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "core/tsv.h"

namespace portkit::analyse {

struct ParameterRule {
  std::string api;        ///< qualified API, or a method name when `method`
  bool method = false;
  std::string parameter;
  std::vector<size_t> positions;  ///< positional indices (self excluded)
  std::string expected, unexpected, default_value;
  bool has_expected = false;
  std::string tip;
};

struct Advice {
  std::vector<std::pair<std::string, std::string>> precision;    ///< api, tip
  std::vector<std::pair<std::string, std::string>> performance;  ///< api, tip
  std::vector<ParameterRule> parameters;
  struct SuggestUse {
    std::string api;
    std::vector<std::string> when_used;
    std::string tip;
  };
  std::vector<SuggestUse> suggest_use;
  struct Global {
    std::string key, kind, tip;
  };
  std::vector<Global> global;
};

struct CudaOnly {
  std::vector<std::string> api_prefixes;
  std::vector<std::string> methods;
  std::vector<std::string> attributes;
  std::vector<std::string> device_types;
  std::vector<std::string> distributed_backends;
};

class Target {
 public:
  /// Loads target `name` for torch `version` ("2.1.0"; empty = newest) from `data_dir`.
  /// `warning` receives a message when the nearest version list stands in for the one asked.
  static Expected<Target> Load(const std::filesystem::path& data_dir, const std::string& name,
                               const std::string& version, std::string* warning);

  const std::string& name() const { return name_; }
  /// The version whose list is used ("2.1"), empty for a target without lists.
  const std::string& list_version() const { return list_version_; }
  /// True when every torch API is supported except CUDA-only code (the cpu target).
  bool all_supported() const { return all_supported_; }

  const std::string* Unsupported(const std::string& qname) const;
  const std::string* Supported(const std::string& qname) const;
  bool Known(const std::string& qname) const { return Unsupported(qname) || Supported(qname); }
  const Advice& advice() const { return advice_; }
  const CudaOnly& cuda() const { return cuda_; }
  /// npu replacement of a CUDA API (torch.cuda.X → torch_npu.npu.X), or null.
  const std::string* Rewrite(const std::string& qname) const;
  /// The npu name of a CUDA-era API by the longest matching dotted prefix of the rewrite table
  /// (torch.cuda.amp.X → torch_npu.npu.amp.X), or empty when no rule applies.
  std::string RewriteByPrefix(const std::string& qname) const;
  /// "tensor", "module" or "tensor,module" for a method only torch objects have, or null.
  const std::string* TorchOnlyMethod(const std::string& method) const;

  /// Versions listed by data/targets/<name>/target.json.
  const std::vector<std::string>& versions() const { return versions_; }

 private:
  std::string name_, list_version_;
  bool all_supported_ = false;
  std::vector<std::string> versions_;
  std::unordered_map<std::string, std::string> unsupported_, supported_, rewrites_, torch_methods_;
  Advice advice_;
  CudaOnly cuda_;
};

using portkit::ReadTsv;

}  // namespace portkit::analyse
