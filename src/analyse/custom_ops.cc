#include "analyse/custom_ops.h"

#include <algorithm>
#include <cctype>
#include <regex>

namespace portkit::analyse {
namespace {

uint32_t LineOf(std::string_view text, size_t offset) {
  return static_cast<uint32_t>(std::count(text.begin(), text.begin() + static_cast<long>(offset), '\n') + 1);
}

// The body `{...}` that follows a macro invocation at `pos`, or empty.
std::string_view BlockAfter(std::string_view text, size_t pos) {
  size_t open = text.find('{', pos);
  if (open == std::string_view::npos) return {};
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    else if (text[i] == '}' && --depth == 0) return text.substr(open, i - open + 1);
  }
  return text.substr(open);
}

bool IsIdent(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

int CountParameters(std::string_view params) {
  size_t b = params.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return 0;
  size_t e = params.find_last_not_of(" \t\r\n");
  params = params.substr(b, e - b + 1);
  if (params == "void") return 0;
  int depth = 0, count = 1;
  for (char c : params) {
    if (c == '<' || c == '(' || c == '[' || c == '{') ++depth;
    else if (c == '>' || c == ')' || c == ']' || c == '}') --depth;
    else if (c == ',' && depth == 0) ++count;
  }
  return count;
}

CppScan ScanCppSource(std::string_view text, const std::string& display_path) {
  CppScan scan;
  // Function definitions: `name(params) {` or `name(params) const {` — enough to count arguments.
  static const std::regex kDef(R"(([A-Za-z_]\w*)\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)\s*(?:const\s*)?(?:noexcept\s*)?\{)");
  std::string owned(text);
  for (auto it = std::sregex_iterator(owned.begin(), owned.end(), kDef); it != std::sregex_iterator(); ++it) {
    std::string name = (*it)[1];
    if (name == "if" || name == "for" || name == "while" || name == "switch" || name == "catch" ||
        name == "PYBIND11_MODULE" || name.rfind("TORCH_LIBRARY", 0) == 0)
      continue;
    scan.functions.emplace(name, CountParameters((*it)[2].str()));
  }
  struct Macro {
    const char* name;
    bool torch_library;
  };
  static constexpr Macro kMacros[] = {{"PYBIND11_MODULE", false},
                                      {"TORCH_LIBRARY_FRAGMENT", true},
                                      {"TORCH_LIBRARY_IMPL", true},
                                      {"TORCH_LIBRARY", true}};
  static const std::regex kPyDef(R"re((\w+)\s*\.\s*def\s*\(\s*"(\w+)"\s*,\s*&?\s*([\w:]+))re");
  static const std::regex kPyClass(R"re(py::class_\s*<[^>]*>\s*\(\s*\w+\s*,\s*"(\w+)")re");
  static const std::regex kTorchDef(R"re(\.\s*def\s*\(\s*(?:TORCH_SELECTIVE_SCHEMA\s*\()?\s*"(\w+)(?:\.\w+)?\s*(\(([^"]*)\))?[^"]*"\s*(?:\)\s*)?(?:,\s*&?\s*([\w:]+))?)re");
  static const std::regex kTorchImpl(R"re(\.\s*impl\s*\(\s*"(\w+)"\s*,\s*(?:TORCH_FN\s*\(\s*)?&?\s*([\w:]+))re");
  static const std::regex kTorchClass(R"re(\.\s*class_\s*<[^>]*>\s*\(\s*"(\w+)")re");
  for (const auto& macro : kMacros) {
    size_t pos = 0;
    std::string_view mname = macro.name;
    while ((pos = text.find(mname, pos)) != std::string_view::npos) {
      size_t after = pos + mname.size();
      // Do not let TORCH_LIBRARY match TORCH_LIBRARY_IMPL/FRAGMENT, nor inside longer names.
      if ((after < text.size() && IsIdent(text[after])) || (pos > 0 && IsIdent(text[pos - 1]))) {
        pos = after;
        continue;
      }
      size_t open = text.find('(', after);
      size_t close = text.find(')', after);
      if (open == std::string_view::npos || close == std::string_view::npos) break;
      std::string args(text.substr(open + 1, close - open - 1));
      std::string ns = args.substr(0, args.find(','));
      ns.erase(std::remove_if(ns.begin(), ns.end(), ::isspace), ns.end());
      std::string_view block = BlockAfter(text, close);
      size_t block_offset = block.empty() ? close : static_cast<size_t>(block.data() - text.data());
      std::string body(block);
      auto add = [&](std::string name, int count, std::string symbol, size_t rel) {
        CustomOp op;
        op.name = std::move(name);
        op.ns = macro.torch_library ? ns : "";
        op.arg_count = count;
        op.file = display_path;
        op.line = LineOf(text, block_offset + rel);
        op.how = macro.name;
        scan.ops.push_back(std::move(op));
        scan.symbols.push_back(std::move(symbol));
      };
      if (!macro.torch_library) {
        for (auto it = std::sregex_iterator(body.begin(), body.end(), kPyDef); it != std::sregex_iterator(); ++it) {
          // Count py::arg(...) annotations in this def call for the argument count when present.
          add((*it)[2], -1, (*it)[3], static_cast<size_t>(it->position()));
        }
        for (auto it = std::sregex_iterator(body.begin(), body.end(), kPyClass); it != std::sregex_iterator(); ++it)
          add((*it)[1], -1, "", static_cast<size_t>(it->position()));
      } else {
        for (auto it = std::sregex_iterator(body.begin(), body.end(), kTorchDef); it != std::sregex_iterator(); ++it) {
          int count = (*it)[2].matched ? CountParameters((*it)[3].str()) : -1;
          add((*it)[1], count, (*it)[4].matched ? (*it)[4].str() : "", static_cast<size_t>(it->position()));
        }
        for (auto it = std::sregex_iterator(body.begin(), body.end(), kTorchImpl); it != std::sregex_iterator(); ++it)
          add((*it)[1], -1, (*it)[2], static_cast<size_t>(it->position()));
        for (auto it = std::sregex_iterator(body.begin(), body.end(), kTorchClass); it != std::sregex_iterator(); ++it)
          add((*it)[1], -1, "", static_cast<size_t>(it->position()));
      }
      pos = after;
    }
  }
  return scan;
}

void CustomOpTable::Add(CustomOp op) {
  by_name[op.name].push_back(ops.size());
  ops.push_back(std::move(op));
}

void CustomOpTable::Link(std::vector<CppScan> scans) {
  std::unordered_map<std::string, int> functions;
  for (const auto& s : scans)
    for (const auto& [name, count] : s.functions) functions.emplace(name, count);
  std::vector<CustomOp> merged;
  for (auto& s : scans) {
    for (size_t i = 0; i < s.ops.size(); ++i) {
      CustomOp& op = s.ops[i];
      if (op.arg_count < 0 && !s.symbols[i].empty()) {
        std::string sym = s.symbols[i];
        size_t colon = sym.rfind("::");
        if (colon != std::string::npos) sym = sym.substr(colon + 2);
        if (auto it = functions.find(sym); it != functions.end()) op.arg_count = it->second;
      }
      merged.push_back(std::move(op));
    }
  }
  // An impl and a def of the same op: keep one, preferring a known arg count.
  std::sort(merged.begin(), merged.end(), [](const CustomOp& a, const CustomOp& b) {
    return std::tie(a.name, a.ns, a.file, a.line) < std::tie(b.name, b.ns, b.file, b.line);
  });
  for (auto& op : merged) {
    auto it = by_name.find(op.name);
    if (it != by_name.end()) {
      bool dup = false;
      for (size_t idx : it->second) {
        if (ops[idx].ns == op.ns) {
          if (ops[idx].arg_count < 0) ops[idx].arg_count = op.arg_count;
          dup = true;
        }
      }
      if (dup) continue;
    }
    Add(std::move(op));
  }
}

const CustomOp* CustomOpTable::Match(std::string_view name, size_t args, bool has_splat) const {
  auto it = by_name.find(std::string(name));
  if (it == by_name.end()) return nullptr;
  for (size_t idx : it->second) {
    const CustomOp& op = ops[idx];
    if (op.arg_count < 0 || has_splat || static_cast<size_t>(op.arg_count) == args) return &op;
  }
  return nullptr;
}

}  // namespace portkit::analyse
