#pragma once
/// What portkit knows about a deployment target, read from `<dir>/target.json` (schema in
/// data/README.md): device type, Python module and import line, renames that migrate CUDA code,
/// fused-API replacements and profile-advisor facts. Code reads these facts and never spells a
/// target's names itself. Targets live in `<data>/targets/<name>/`; a user's own target is any
/// folder holding a target.json, named by its path.
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/status.h"

namespace portkit::target {

/// Renames applied when CUDA code is migrated to the target (keys: the CUDA spelling).
struct Renames {
  std::map<std::string, std::string> methods;               ///< `x.cuda()` → `x.npu()`: "cuda" → "npu"
  std::map<std::string, std::string> attributes;            ///< `x.is_cuda` → `x.is_npu`
  std::map<std::string, std::string> distributed_backends;  ///< "nccl" → "hccl"
  std::map<std::string, std::string> env_vars;              ///< string literals naming an env var

  bool empty() const {
    return methods.empty() && attributes.empty() && distributed_backends.empty() && env_vars.empty();
  }
};

/// An operator or activation the target does not run natively (profile.non_native_ops).
struct NonNativeOp {
  std::string name;     ///< "Mish"
  std::string why;      ///< how the target runs it ("decomposed into several units")
  std::string modules;  ///< how it is spelled in code ("torch.nn.Mish, torch.nn.functional.mish")
  /// Profiled operator names of the op itself, forward and backward ("aten::mish", "aten::mish_backward").
  std::vector<std::string> ops;
  /// Optional: its decomposed form, a regex over one thread's aten ops in time order (the
  /// `aten::` prefix dropped, joined by '-'): "softplus-tanh-mul".
  std::string decomposed;
  /// Backward operators of the decomposed form, counted where the decomposed form ran.
  std::vector<std::string> decomposed_backward;
  std::string replacement;  ///< the fix ("torch.nn.LeakyReLU")
  std::string caveat;       ///< what to check after the fix (accuracy)
};

/// Facts the profile advisor (`prof analyse`) uses.
struct ProfileFacts {
  /// Activations the target runs natively (informative; named in the advice).
  std::vector<std::string> native_activations;
  /// Operators the target does not run natively, with their replacement.
  std::vector<NonNativeOp> non_native_ops;
  /// Substrings of device kernel names that mark collective communication ("hccl").
  std::vector<std::string> communication_kernels;
  /// Fusion pattern name (data/advisor/fusion_patterns.tsv) → what replaces it on the target.
  std::map<std::string, std::string> fusion_apis;
};

/// What kind of deployment a target is.
enum class TargetKind : uint8_t {
  kAccelerator,  ///< a device that CUDA code is ported to ("npu")
  kCpu,          ///< a CPU-only deployment: CUDA-only code is unsupported, not migrated
};

struct TargetFacts {
  std::string name;  ///< "npu"
  std::string description;
  TargetKind kind = TargetKind::kAccelerator;  ///< "kind": "accelerator" or "cpu" (required)
  std::filesystem::path dir;                   ///< folder holding target.json (and the support lists)
  bool is_default = false;                     ///< the target used when none is named
  std::vector<std::string> versions;           ///< torch versions with support lists ("2.1")
  std::string device_type;                     ///< device string replacing "cuda" ("npu"); empty for none
  std::string python_module;                   ///< module that provides the device ("torch_npu"); empty for none
  std::string import_line;                     ///< the line that loads it ("import torch_npu")
  std::string device_module;                   ///< counterpart of torch.cuda: torch.cuda.X → <device_module>.X
  /// How migrate spells device_module in the code it writes ("torch.npu": the same module once
  /// import_line has run); imports keep device_module. Empty: device_module itself.
  std::string device_module_alias;
  std::string transfer_import;  ///< import that maps CUDA calls to the device at run time
  /// The dispatch key the target's kernels are registered for ("PrivateUse1"); empty: unknown.
  std::string dispatch_key;
  /// The target's own process-group backends ("hccl"), its preferred one first. Without
  /// renames.distributed_backends, CUDA's backends are renamed to the first.
  std::vector<std::string> distributed_backends;
  /// Counterpart of torch.cuda.amp (autocast, GradScaler): "torch_npu.npu.amp". Without it,
  /// `<device_module>.amp`.
  std::string amp_module;
  /// Modules of CUDA-only libraries (apex) → the target's fused replacement, fully qualified
  /// ("apex.normalization.FusedLayerNorm" → ...). Without an entry, migrate uses the plain torch
  /// equivalent of data/cuda/cuda_libraries.tsv.
  std::map<std::string, std::string> fused_modules;
  /// How the target runs float64 when it has no fast fp64 (the advice's text); empty: native.
  std::string fp64;
  Renames renames;
  /// Pattern rule name (rms_norm, rotary, swiglu, attention, mask_index_put) → fused API.
  std::map<std::string, std::string> fused_apis;
  /// Qualified optimizer ("torch.optim.AdamW") → fused replacement on the target.
  std::map<std::string, std::string> fused_optimizers;
  /// CUDA-backed op of a library (data/cuda/cuda_only.json `library_ops`, "torchvision.ops.nms")
  /// → what makes it run on the target; an op without an entry has no known replacement.
  std::map<std::string, std::string> library_ops;
  ProfileFacts profile;

  /// The folder of target.json, for messages ("<dir>/target.json").
  std::filesystem::path file() const { return dir / "target.json"; }
  bool accelerator() const { return kind == TargetKind::kAccelerator; }
  /// True when `portkit migrate` can port code to this target: an accelerator with a device type.
  bool migratable() const { return accelerator() && !device_type.empty(); }
  /// The counterpart of torch.cuda.amp: amp_module, else `<device_module>.amp`, else empty.
  std::string AmpModule() const {
    return !amp_module.empty() ? amp_module : device_module.empty() ? std::string() : device_module + ".amp";
  }
  /// `name` as migrate writes it in code: a name under device_module re-spelled under
  /// device_module_alias ("torch_npu.npu.synchronize" → "torch.npu.synchronize").
  std::string SpellInCode(const std::string& name) const;
  /// The target's device methods (the values of renames.methods: "npu"), sorted.
  std::vector<std::string> DeviceMethods() const;
  /// Fused API for pattern rule `rule`, or null when the target has none.
  const std::string* FusedApi(std::string_view rule) const;
};

/// Reads `dir/target.json`. Errors name the file and what is wrong (a missing file, bad JSON, an
/// unknown key, a value of the wrong type).
Expected<TargetFacts> LoadTargetFacts(const std::filesystem::path& dir);

/// The target's API surface, `dir/api_surface.tsv` (first column; `#` lines are comments): the
/// names of the target module that exist, against which suggested replacements are checked.
/// Empty when the target has no such file; errors name the file.
Expected<std::set<std::string>> LoadApiSurface(const std::filesystem::path& dir);

/// Names of the folders of `<dir>/targets` that hold a target.json, over all data folders,
/// sorted, each once.
std::vector<std::string> ListTargets(const DataDirs& data);

/// The folder of the target called `name` in the first data folder that has one, or empty.
std::filesystem::path TargetDir(const DataDirs& data, const std::string& name);

/// The folder of target `name_or_path`: a name from ListTargets, or the path of a folder holding a
/// target.json (any value with a '/' or naming an existing folder). Empty: the default target.
/// NotFound lists the available targets; two defaults are an error (DefaultTargetName).
Expected<std::filesystem::path> ResolveTarget(const DataDirs& data, const std::string& name_or_path);

/// Loads the target named as for ResolveTarget.
Expected<TargetFacts> LoadTarget(const DataDirs& data, const std::string& name_or_path);

/// The default target: the one whose target.json says `"default": true`; the only target when
/// there is one; else an error. Two targets saying `"default": true` are an error naming both
/// files. NotFound when the data folders have no targets.
Expected<std::string> DefaultTargetName(const DataDirs& data);

/// Names of the targets `portkit migrate` can port to (ListTargets, migratable()).
std::vector<std::string> MigrateTargets(const DataDirs& data);

/// For a `--target` option check: empty when `value` names a loadable target (and, with
/// `for_migrate`, a migratable one), else the message saying what is wrong and what is available.
std::string CheckTargetChoice(const DataDirs& data, const std::string& value, bool for_migrate);

/// Help text of a `--target` option: the choices, the default, and that a path is accepted.
std::string TargetOptionHelp(const DataDirs& data, bool for_migrate);

/// "cpu, npu" (for help texts and messages).
std::string JoinNames(const std::vector<std::string>& names);

}  // namespace portkit::target
