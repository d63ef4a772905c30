#pragma once
/// A deployment target described by data (data/targets/<name>/): its facts (target.json: device,
/// module, renames, fused APIs), which torch APIs it supports for a torch version, advice for
/// precision and performance, and what counts as CUDA-only code.
#include <filesystem>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "core/tsv.h"
#include "target/target_facts.h"

namespace portkit::analyse {

struct ParameterRule {
  std::string api;  ///< qualified API, or a method name when `method`
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
  std::vector<std::string> apis;      ///< exact qualified names (torch.utils.cpp_extension.CUDA_HOME)
  std::vector<std::string> env_vars;  ///< environment variables only CUDA reads (CUDA_VISIBLE_DEVICES)
  /// CUDA-backed ops of libraries ("torchvision.ops.nms"); a name under the same package
  /// (first two components) with the same last component is the same op
  /// (torchvision.ops.boxes.nms).
  std::vector<std::string> library_ops;
  std::vector<std::string> env_var_prefixes;  ///< upper-case names with these prefixes (NCCL_)
  std::vector<std::string> build_strings;     ///< CUDA compiler keys in build settings ("nvcc")
  std::vector<std::string> keyword_tokens;    ///< keyword-name tokens (cudnn_benchmark=...)
  /// CUDA's device module ("torch.cuda"): `<it>.X` → `<target device_module>.X` where the target's
  /// rewrite table has no entry.
  std::string device_module;
  /// Modules of other runtimes (tensorrt, onnxruntime, cv2.cuda, cupy): their calls' arguments
  /// ("cuda:0", device numbers) belong to them and are never migrated.
  std::vector<std::string> other_runtimes;
  /// `_`-separated tokens of a name holding a device number (local_rank, gpu_id).
  std::vector<std::string> device_number_tokens;
  /// Compiled CUDA extension modules (apex's amp_C, apex_C): an import of one (or of a submodule)
  /// is listed for review by migrate.
  std::vector<std::string> extension_modules;
};

/// A class of a CUDA-only library and its plain torch equivalent (data/cuda/cuda_libraries.tsv).
struct CudaLibraryClass {
  std::string name;   ///< "apex.normalization.FusedLayerNorm"
  std::string plain;  ///< "torch.nn.LayerNorm"; empty when torch has none (`-` in the table)
  /// Keywords of `name` that `plain` lacks or reads differently: a call using one is listed for
  /// review instead of being ported.
  std::vector<std::string> unsure_keywords;
  /// Non-empty: why the library's own name is kept (ports keep it); each import and call is
  /// listed for review naming `plain`, and nothing is changed.
  std::string kept;
};

class Target {
 public:
  /// Loads target `name` (a name under data_dir/targets, the path of a folder holding a
  /// target.json, or empty for the default target) for torch `version` ("2.1.0"; empty = newest).
  /// `warning` receives a message when the nearest version list stands in for the one asked.
  /// Errors name the file and what is wrong; an unknown name lists the available targets.
  static Expected<Target> Load(const DataDirs& data, const std::string& name, const std::string& version,
                               std::string* warning);

  const std::string& name() const { return name_; }
  /// The target's facts (target.json); `facts().dir` is its folder.
  const target::TargetFacts& facts() const { return facts_; }
  /// The version whose list is used ("2.1"), empty for a target without lists.
  const std::string& list_version() const { return list_version_; }
  /// True when the target has no support lists: every torch API counts as supported (only
  /// CUDA-only code matters).
  bool all_supported() const { return all_supported_; }
  /// True for a CPU-only deployment ("kind": "cpu"): CUDA-only code is unsupported there, not
  /// migrated.
  bool cpu_only() const { return !facts_.accelerator(); }

  const std::string* Unsupported(const std::string& qname) const;
  const std::string* Supported(const std::string& qname) const;
  bool Known(const std::string& qname) const { return Unsupported(qname) || Supported(qname); }
  /// Whether the support list of any torch version names `qname` (the API exists in torch).
  bool KnownInAnyVersion(const std::string& qname) const { return Known(qname) || other_versions_.count(qname) > 0; }
  const Advice& advice() const { return advice_; }
  const CudaOnly& cuda() const { return cuda_; }
  /// The classes of CUDA-only libraries with a plain torch equivalent, by name.
  const std::vector<CudaLibraryClass>& cuda_libraries() const { return cuda_libraries_; }
  /// True when `qname` is under a module of another runtime (cuda().other_runtimes).
  bool OtherRuntime(const std::string& qname) const;
  /// The target's name for a CUDA API by its rewrites.tsv (exact match), or null.
  const std::string* Rewrite(const std::string& qname) const;
  /// The target's name of a CUDA-era API by the longest matching dotted prefix of the rewrite
  /// table (torch.cuda.amp.X → <new>.amp.X); without one, an API under CUDA's device module
  /// becomes the same name under the target's (torch.cuda.X → <device_module>.X); empty when no
  /// rule applies.
  std::string RewriteByPrefix(const std::string& qname) const;
  /// "tensor", "module" or "tensor,module" for a method only torch objects have, or null.
  const std::string* TorchOnlyMethod(const std::string& method) const;

  /// Why `qname` is never an unknown API (data/python/torch_never_unknown.tsv: "host\t..." or
  /// "other_device\t..."), by the longest listed prefix of whole dotted components; null if not.
  const std::string* NeverUnknown(const std::string& qname) const;

  /// Versions with support lists (the folders torch-X.Y of the target).
  const std::vector<std::string>& versions() const { return versions_; }

 private:
  target::TargetFacts facts_;
  std::string name_, list_version_;
  bool all_supported_ = false;
  std::vector<std::string> versions_;
  std::unordered_map<std::string, std::string> unsupported_, supported_, rewrites_, torch_methods_, never_unknown_;
  std::unordered_set<std::string> other_versions_;  ///< names listed only for other versions
  Advice advice_;
  CudaOnly cuda_;
  std::vector<CudaLibraryClass> cuda_libraries_;
};

using portkit::ReadTsv;

}  // namespace portkit::analyse
