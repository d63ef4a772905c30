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
  int arg_count = -1;     ///< -1 when the signature was not found
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
};

CppScan ScanCppSource(std::string_view text, const std::string& display_path);

struct CustomOpTable {
  std::vector<CustomOp> ops;
  std::unordered_map<std::string, std::vector<size_t>> by_name;

  /// Merges scans; an op's arg count comes from its function's definition in any source.
  void Link(std::vector<CppScan> scans);
  void Add(CustomOp op);
  /// The op a Python call `name(args)` with `args` positional arguments matches, or null.
  const CustomOp* Match(std::string_view name, size_t args, bool has_splat) const;
};

/// Number of top-level comma-separated items in a parameter list text ("" → 0, "void" → 0).
int CountParameters(std::string_view params);

}  // namespace portkit::analyse
