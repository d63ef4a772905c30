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

std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// Index just past the string or char literal that starts at `i` (text[i] is the quote).
size_t SkipLiteral(std::string_view text, size_t i) {
  char quote = text[i];
  for (++i; i < text.size(); ++i) {
    if (text[i] == '\\') ++i;
    else if (text[i] == quote) return i + 1;
  }
  return text.size();
}

// The text between the parenthesis at `open` and its match, or npos-length view when unmatched.
std::string_view Parenthesized(std::string_view text, size_t open, size_t* close_out) {
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"' || c == '\'') {
      i = SkipLiteral(text, i) - 1;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')' && --depth == 0) {
      *close_out = i;
      return text.substr(open + 1, i - open - 1);
    }
  }
  *close_out = std::string_view::npos;
  return {};
}

// The first string literal's content in `item`, or empty.
std::string_view FirstString(std::string_view item) {
  size_t q = item.find('"');
  if (q == std::string_view::npos) return {};
  size_t end = SkipLiteral(item, q);
  return item.substr(q + 1, end - q - 2);
}

// Whether `item` has an '=' outside brackets and literals (`py::arg("x") = 1`, `int k=1`).
bool HasDefault(std::string_view item) {
  int depth = 0;
  for (size_t i = 0; i < item.size(); ++i) {
    char c = item[i];
    if (c == '"' || c == '\'') i = SkipLiteral(item, i) - 1;
    else if (c == '(' || c == '[' || c == '{' || c == '<') ++depth;
    else if (c == ')' || c == ']' || c == '}' || (c == '>' && (i == 0 || item[i - 1] != '-'))) --depth;
    else if (c == '=' && depth == 0 && (i + 1 >= item.size() || item[i + 1] != '=')) return true;
  }
  return false;
}

// Parameter names and defaults of a schema or declaration list ("Tensor x, int k=1, *, bool f").
void SignatureFromParams(std::string_view params, int* min_args, int* max_args,
                         std::vector<std::string>* names) {
  int count = 0, required = 0;
  names->clear();
  for (std::string_view item : SplitTopLevel(params)) {
    if (item.empty() || item == "*" || item == "void") continue;
    ++count;
    bool has_default = HasDefault(item);
    required += !has_default;
    std::string_view decl = has_default ? Trim(item.substr(0, item.find('='))) : item;
    size_t e = decl.size();
    while (e > 0 && !IsIdent(decl[e - 1])) --e;
    size_t b = e;
    while (b > 0 && IsIdent(decl[b - 1])) --b;
    names->emplace_back(decl.substr(b, e - b));
  }
  *min_args = required;
  *max_args = count;
}

// `text` with its comments replaced by spaces (newlines kept, so offsets and line numbers stay
// right): a comma in `int k /* rows, cols */` is not a parameter separator.
std::string BlankComments(std::string_view text) {
  std::string out(text);
  for (size_t i = 0; i < out.size(); ++i) {
    char c = out[i];
    if (c == '"' || c == '\'') {
      i = SkipLiteral(out, i) - 1;
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '/') {
      for (; i < out.size() && out[i] != '\n'; ++i) out[i] = ' ';
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '*') {
      size_t end = out.find("*/", i + 2);
      end = end == std::string::npos ? out.size() : end + 2;
      for (; i < end; ++i)
        if (out[i] != '\n') out[i] = ' ';
      --i;
    }
  }
  return out;
}

bool IsCpuKey(std::string_view key) {
  return key == "CPU" || key == "AutogradCPU" || key == "QuantizedCPU" || key == "SparseCPU";
}

}  // namespace

std::vector<std::string_view> SplitTopLevel(std::string_view text) {
  std::vector<std::string_view> items;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"' || c == '\'') {
      i = SkipLiteral(text, i) - 1;
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      ++depth;
    } else if (c == ')' || c == ']' || c == '}' || (c == '>' && (i == 0 || text[i - 1] != '-'))) {
      --depth;
    } else if (c == ',' && depth == 0) {
      items.push_back(Trim(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  std::string_view last = Trim(text.substr(std::min(start, text.size())));
  if (!last.empty() || !items.empty()) items.push_back(last);
  return items;
}

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
  {
    std::string_view ext = std::string_view(display_path).substr(std::min(display_path.size(), display_path.rfind('.')));
    scan.mentions_cuda = ext == ".cu" || ext == ".cuh" || text.find("__global__") != std::string_view::npos;
    for (size_t i = 0; !scan.mentions_cuda && i + 4 <= text.size(); ++i) {
      if ((text[i] | 0x20) == 'c' && (text[i + 1] | 0x20) == 'u' && (text[i + 2] | 0x20) == 'd' &&
          (text[i + 3] | 0x20) == 'a')
        scan.mentions_cuda = true;
    }
  }
  // Everything below reads the source without its comments (commas inside them are no separators).
  std::string owned = BlankComments(text);
  text = owned;
  // Function definitions: `name(params) {` or `name(params) const {` — enough to count arguments.
  static const std::regex kDef(R"(([A-Za-z_]\w*)\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)\s*(?:const\s*)?(?:noexcept\s*)?\{)");
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
      std::string key;  // TORCH_LIBRARY_IMPL(ns, KEY, m)
      if (std::string_view(macro.name) == "TORCH_LIBRARY_IMPL") {
        auto parts = SplitTopLevel(args);
        if (parts.size() >= 2) key = std::string(parts[1]);
      }
      std::string_view block = BlockAfter(text, close);
      size_t block_offset = block.empty() ? close : static_cast<size_t>(block.data() - text.data());
      std::string body(block);
      auto add = [&](std::string name, int count, std::string symbol, size_t rel) -> CustomOp& {
        CustomOp op;
        op.name = std::move(name);
        op.ns = macro.torch_library ? ns : "";
        op.arg_count = count;
        op.dispatch_key = key;
        op.file = display_path;
        op.line = LineOf(text, block_offset + rel);
        op.how = macro.name;
        scan.symbols.push_back(std::move(symbol));
        scan.ops.push_back(std::move(op));
        return scan.ops.back();
      };
      if (!macro.torch_library) {
        // `<module>.def("name", fn, "doc", py::arg("x"), py::arg("y") = 1, ...)`; chained
        // `.def` of a py::class_ (after a `)`) are methods, not module functions.
        std::string_view b(body);
        for (size_t d = b.find(".def"); d != std::string_view::npos; d = b.find(".def", d + 4)) {
          size_t prev = d;
          while (prev > 0 && std::isspace(static_cast<unsigned char>(b[prev - 1]))) --prev;
          if (prev == 0 || !IsIdent(b[prev - 1])) continue;
          size_t open_paren = d + 4;
          while (open_paren < b.size() && std::isspace(static_cast<unsigned char>(b[open_paren]))) ++open_paren;
          if (open_paren >= b.size() || b[open_paren] != '(') continue;
          size_t close_paren;
          std::string_view inner = Parenthesized(b, open_paren, &close_paren);
          if (close_paren == std::string_view::npos) continue;
          auto items = SplitTopLevel(inner);
          if (items.size() < 2 || items[0].empty() || items[0].front() != '"') continue;
          std::string_view name = FirstString(items[0]);
          if (name.empty()) continue;
          int min_args = -1, max_args = -1;
          std::vector<std::string> names;
          int py_args = 0, required = 0;
          for (size_t i = 2; i < items.size(); ++i) {
            std::string_view item = items[i];
            bool is_arg = item.rfind("py::arg", 0) == 0 || item.rfind("pybind11::arg", 0) == 0 ||
                          (item.size() > 3 && item.front() == '"' && item.find("\"_a") != std::string_view::npos);
            if (!is_arg || item.rfind("py::args", 0) == 0) continue;
            ++py_args;
            required += !HasDefault(item);
            names.emplace_back(FirstString(item));
          }
          std::string symbol;
          std::string_view fn = items[1];
          if (py_args > 0) {
            min_args = required;
            max_args = py_args;
          } else if (!fn.empty() && fn.front() == '[') {
            // A lambda: count its parameters.
            size_t p = fn.find('(');
            size_t pc;
            if (p != std::string_view::npos) {
              std::string_view params = Parenthesized(fn, p, &pc);
              if (pc != std::string_view::npos) min_args = max_args = CountParameters(params);
            }
          } else {
            while (!fn.empty() && (fn.front() == '&' || std::isspace(static_cast<unsigned char>(fn.front()))))
              fn.remove_prefix(1);
            size_t e = 0;
            while (e < fn.size() && (IsIdent(fn[e]) || fn[e] == ':')) ++e;
            symbol = std::string(fn.substr(0, e));
          }
          CustomOp& op = add(std::string(name), max_args, symbol, d);
          op.min_args = min_args;
          op.arg_names = std::move(names);
        }
        for (auto it = std::sregex_iterator(body.begin(), body.end(), kPyClass); it != std::sregex_iterator(); ++it)
          add((*it)[1], -1, "", static_cast<size_t>(it->position()));
      } else {
        for (auto it = std::sregex_iterator(body.begin(), body.end(), kTorchDef); it != std::sregex_iterator(); ++it) {
          int min_args = -1, count = -1;
          std::vector<std::string> names;
          if ((*it)[2].matched) SignatureFromParams((*it)[3].str(), &min_args, &count, &names);
          CustomOp& op = add((*it)[1], count, (*it)[4].matched ? (*it)[4].str() : "",
                             static_cast<size_t>(it->position()));
          op.min_args = min_args;
          op.arg_names = std::move(names);
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
  bool any_cuda = false;
  // Dispatch keys each TORCH_LIBRARY op is implemented for ("ns::name" → keys).
  std::unordered_map<std::string, std::vector<std::string>> keys;
  for (const auto& s : scans) {
    for (const auto& [name, count] : s.functions) functions.emplace(name, count);
    any_cuda |= s.mentions_cuda;
    for (const auto& op : s.ops)
      if (!op.dispatch_key.empty()) keys[op.ns + "::" + op.name].push_back(op.dispatch_key);
  }
  auto cpu_only = [&](const CustomOp& op) {
    if (!any_cuda) return true;  // no C++ source of the project mentions CUDA
    auto it = keys.find(op.ns + "::" + op.name);
    if (op.ns.empty() || it == keys.end()) return false;
    return std::all_of(it->second.begin(), it->second.end(), [](const std::string& k) { return IsCpuKey(k); });
  };
  std::vector<CustomOp> merged;
  for (auto& s : scans) {
    for (size_t i = 0; i < s.ops.size(); ++i) {
      CustomOp& op = s.ops[i];
      if (op.arg_count < 0 && !s.symbols[i].empty()) {
        std::string sym = s.symbols[i];
        size_t colon = sym.rfind("::");
        if (colon != std::string::npos) sym = sym.substr(colon + 2);
        if (auto it = functions.find(sym); it != functions.end()) op.arg_count = op.min_args = it->second;
      }
      if (cpu_only(op)) {
        cpu_ops.push_back(std::move(op));
        continue;
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
          if (ops[idx].arg_count < 0) {
            ops[idx].arg_count = op.arg_count;
            ops[idx].min_args = op.min_args;
            ops[idx].arg_names = op.arg_names;
          }
          dup = true;
        }
      }
      if (dup) continue;
    }
    Add(std::move(op));
  }
}

namespace {

bool Fits(const CustomOp& op, const CallShape& call) {
  if (op.arg_count < 0) return true;  // signature unknown: the name decides
  size_t most = static_cast<size_t>(op.arg_count);
  size_t fewest = op.min_args < 0 ? most : static_cast<size_t>(op.min_args);
  size_t given = call.positional + call.keywords.size();
  if (given > most) return false;
  if (!op.arg_names.empty()) {
    for (std::string_view kw : call.keywords) {
      auto at = std::find(op.arg_names.begin(), op.arg_names.end(), kw);
      if (at == op.arg_names.end() || static_cast<size_t>(at - op.arg_names.begin()) < call.positional)
        return false;
    }
  }
  bool open = call.star || (call.double_star && !op.arg_names.empty());
  return open || given >= fewest;
}

}  // namespace

const CustomOp* CustomOpTable::Match(std::string_view name, const CallShape& call) const {
  auto it = by_name.find(std::string(name));
  if (it == by_name.end()) return nullptr;
  for (size_t idx : it->second)
    if (Fits(ops[idx], call)) return &ops[idx];
  return nullptr;
}

}  // namespace portkit::analyse
