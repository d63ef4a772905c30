#pragma once
/// Custom CUDA operators registered from C++/CUDA sources: `PYBIND11_MODULE` (m.def, py::class_)
/// and `TORCH_LIBRARY` / `TORCH_LIBRARY_FRAGMENT` / `TORCH_LIBRARY_IMPL` (m.def, m.impl,
/// m.class_), and ops declared from Python with torch.utils.cpp_extension.load_inline.
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace portkit::analyse {

struct CustomOp {
  std::string name;       ///< Python-visible name ("nms_cuda")
  std::string ns;         ///< TORCH_LIBRARY namespace, empty for pybind11
  int arg_count = -1;     ///< most arguments a call passes; -1 when the signature was not found
  int min_args = -1;      ///< fewest (arguments without a default); -1: the same as arg_count
  /// Parameter names where registered (`py::arg("x")`, a TORCH_LIBRARY schema), in order; empty
  /// when unknown (a pybind11 function without py::arg takes positional arguments only).
  std::vector<std::string> arg_names;
  std::string dispatch_key;  ///< TORCH_LIBRARY_IMPL's dispatch key ("CPU", "CUDA"), else empty
  std::string file;       ///< display path of the registering source
  uint32_t line = 0;
  std::string how;        ///< "PYBIND11_MODULE", "TORCH_LIBRARY", ...
};

/// What one C++/CUDA source contributes; merged with the others by CustomOpTable::Link.
struct CppScan {
  std::vector<CustomOp> ops;
  /// Registered function symbol per op index (for ops whose arg count comes from a definition).
  std::vector<std::string> symbols;
  /// Function definitions seen: name → parameter count.
  std::unordered_map<std::string, int> functions;
  /// Whether the source mentions CUDA at all (a .cu/.cuh file, "cuda" in any case, `__global__`).
  bool mentions_cuda = false;
};

/// How a Python call passes its arguments.
struct CallShape {
  size_t positional = 0;                  ///< plain positional arguments
  std::vector<std::string_view> keywords; ///< names of keyword arguments
  bool star = false;                      ///< `*args`
  bool double_star = false;               ///< `**kwargs`
};

CppScan ScanCppSource(std::string_view text, const std::string& display_path);

struct CustomOpTable {
  std::vector<CustomOp> ops;
  /// Ops with CPU kernels only (registered only under CPU dispatch keys, or in a project whose
  /// C++ sources never mention CUDA): not CUDA operators, not matched.
  std::vector<CustomOp> cpu_ops;
  std::unordered_map<std::string, std::vector<size_t>> by_name;

  /// Merges scans; an op's arg count comes from its function's definition in any source.
  void Link(std::vector<CppScan> scans);
  void Add(CustomOp op);
  /// The op a Python call `name(args)` matches, or null: every argument counts (keywords too),
  /// between the op's fewest and most arguments (py::arg defaults); keywords must name its
  /// parameters where they are registered; `*args` can supply any number of positional
  /// arguments, `**kwargs` any named ones (none for an op without registered names).
  const CustomOp* Match(std::string_view name, const CallShape& call) const;
};

/// Number of top-level comma-separated items in a parameter list text ("" → 0, "void" → 0).
int CountParameters(std::string_view params);
/// Top-level comma-separated items of an argument list text, trimmed.
std::vector<std::string_view> SplitTopLevel(std::string_view text);

}  // namespace portkit::analyse
