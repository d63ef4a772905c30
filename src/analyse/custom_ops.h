#pragma once
/// Custom CUDA operators registered from C++/CUDA sources: `PYBIND11_MODULE` (m.def, py::class_)
/// and `TORCH_LIBRARY` / `TORCH_LIBRARY_FRAGMENT` / `TORCH_LIBRARY_IMPL` (m.def, m.impl,
/// m.class_), and ops declared from Python with torch.utils.cpp_extension.load_inline.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace portkit::analyse {

struct CustomOp {
  std::string name;    ///< Python-visible name ("nms_cuda")
  std::string ns;      ///< TORCH_LIBRARY namespace, empty for pybind11
  int arg_count = -1;  ///< most arguments a call passes; -1 when the signature was not found
  int min_args = -1;   ///< fewest (arguments without a default); -1: the same as arg_count
  /// Parameter names where registered (`py::arg("x")`, a TORCH_LIBRARY schema), in order; empty
  /// when unknown (a pybind11 function without py::arg takes positional arguments only).
  std::vector<std::string> arg_names;
  std::string dispatch_key;  ///< TORCH_LIBRARY_IMPL's dispatch key ("CPU", "CUDA"), else empty
  std::string file;          ///< display path of the registering source
  uint32_t line = 0;
  std::string how;  ///< "PYBIND11_MODULE", "TORCH_LIBRARY", ...
  /// Python module names the registration is importable as (the last component of a
  /// `PYBIND11_MODULE(name, m)` literal or of the `name=` of the build that compiles the file:
  /// `CUDAExtension("pkg.xentropy_cuda", [...])` → "xentropy_cuda"); empty when unknown.
  std::vector<std::string> modules;
};

/// A Python build of a C++/CUDA extension (`CUDAExtension(name=..., sources=[...])`,
/// `CppExtension(...)`, `cpp_extension.load(name=..., sources=[...])`), read from the text of a
/// build script.
struct ExtensionBuild {
  enum class Kind : uint8_t { kUnknown, kCuda, kCpu } kind = Kind::kUnknown;
  std::string module;                ///< last component of the extension's name
  std::vector<std::string> sources;  ///< source paths as written (literal strings)
  /// `load_inline(name=..., functions=[...])`: the functions it binds (string literals), each an
  /// op of `module`; kind kCuda when it has `cuda_sources`, else kCpu.
  std::vector<std::string> inline_functions;
  std::string file;   ///< display path of the build script (set by the caller)
  uint32_t line = 0;  ///< 1-based line of the build call
};

/// The extension builds a Python file's text declares (cheap: only texts with "Extension(" or
/// "sources" are looked at). A `CppExtension` that lists `.cu` sources is a CUDA build.
std::vector<ExtensionBuild> ScanExtensionBuilds(std::string_view python_text);

/// What one C++/CUDA source contributes; merged with the others by CustomOpTable::Link.
struct CppScan {
  std::vector<CustomOp> ops;
  /// Registered function symbol per op index (for ops whose arg count comes from a definition).
  std::vector<std::string> symbols;
  /// Function definitions seen: name → parameter count (`ns::Class::f` is recorded under its
  /// qualified text and its last name).
  std::unordered_map<std::string, int> functions;
  /// Fewest and most parameters over every definition of a name in this source (a free function
  /// and a member function of the same name).
  std::unordered_map<std::string, std::pair<int, int>> function_ranges;
  /// Classes whose member functions this source defines (`Handle::read(...) {`).
  std::unordered_set<std::string> classes;
  /// `PYBIND11_MODULE(name, m)` literal module names (TORCH_EXTENSION_NAME excluded).
  std::vector<std::string> module_names;
  /// Whether the source mentions CUDA in code (a .cu/.cuh file, "cuda" in any case outside
  /// comments, `__global__`).
  bool mentions_cuda = false;
  std::string path;  ///< display path
};

/// How a Python call passes its arguments.
struct CallShape {
  size_t positional = 0;                   ///< plain positional arguments
  std::vector<std::string_view> keywords;  ///< names of keyword arguments
  bool star = false;                       ///< `*args`
  bool double_star = false;                ///< `**kwargs`
};

CppScan ScanCppSource(std::string_view text, const std::string& display_path);

struct CustomOpTable {
  std::vector<CustomOp> ops;
  /// Ops with CPU kernels only (registered only under CPU dispatch keys, or in a project whose
  /// C++ sources never mention CUDA): not CUDA operators, not matched.
  std::vector<CustomOp> cpu_ops;
  /// Ops that already have a kernel for the target (registered for its dispatch key, or with a
  /// `<op>_<device>` function or source such as `roi_align_forward_npu` / `nms_npu.cpp`): they run
  /// on the target as they are, so they are not CUDA operators either; not matched.
  std::vector<CustomOp> target_ops;
  std::unordered_map<std::string, std::vector<size_t>> by_name;
  /// The target's device type ("npu"; empty for none), set before Link: names the `_npu`
  /// kernels and the dispatch keys (`PrivateUse1`, `NPU`) that give an op a target kernel.
  std::string target_device;

  /// Merges scans; an op's arg count comes from its function's definition in any source. An op
  /// is a CUDA operator when its build says so (`CUDAExtension` / `CppExtension` in `builds`),
  /// else when its registering source or the source defining its function (or class) mentions
  /// CUDA; a binding file that mentions no CUDA and whose functions are defined in sources that
  /// mention none is a CPU extension (`cpu_ops`) even in a project with `.cu` files.
  /// `load_inline` builds add their `functions` as ops of their module (CUDA ones to `ops`).
  void Link(std::vector<CppScan> scans, const std::vector<ExtensionBuild>& builds = {});
  void Add(CustomOp op);
  /// The op a Python call `name(args)` matches, or null: every argument counts (keywords too),
  /// between the op's fewest and most arguments (py::arg defaults); keywords must name its
  /// parameters where they are registered; `*args` can supply any number of positional
  /// arguments, `**kwargs` any named ones (none for an op without registered names).
  /// `receiver_module`: the module the call goes through when known (`xentropy_cuda` in
  /// `xentropy_cuda.forward(...)`): registrations importable under that name are preferred, and
  /// registrations known to belong to other modules do not match.
  const CustomOp* Match(std::string_view name, const CallShape& call, std::string_view receiver_module = {}) const;

  /// The op `name` of the extension module `module` that the call fits, or null.
  const CustomOp* MatchInModule(std::string_view name, const CallShape& call, std::string_view module) const;

  /// Methods of the project's Python classes: name → (fewest, most) arguments besides self.
  std::unordered_multimap<std::string, std::pair<int, int>> python_methods;
  /// Whether a Python method `name` of the project could take this call (then a call on a
  /// receiver of unknown type is not taken for the extension op of the same name).
  bool PythonMethodFits(std::string_view name, const CallShape& call) const;
};

/// Number of top-level comma-separated items in a parameter list text ("" → 0, "void" → 0).
int CountParameters(std::string_view params);
/// Top-level comma-separated items of an argument list text, trimmed.
std::vector<std::string_view> SplitTopLevel(std::string_view text);

}  // namespace portkit::analyse
