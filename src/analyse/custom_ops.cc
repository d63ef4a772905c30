#include "analyse/custom_ops.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <tuple>
#include <unordered_set>

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
void SignatureFromParams(std::string_view params, int* min_args, int* max_args, std::vector<std::string>* names) {
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

bool IsCudaKey(std::string_view key) { return key.find("CUDA") != std::string_view::npos; }

// `T::member(...) ... {` (a member function, constructor or destructor defined out of the class,
// initializer lists included): the classes whose members `text` defines.
void MemberDefinitionClasses(std::string_view text, std::unordered_set<std::string>* out) {
  for (size_t pos = text.find("::"); pos != std::string_view::npos; pos = text.find("::", pos + 2)) {
    size_t b = pos;
    while (b > 0 && IsIdent(text[b - 1])) --b;
    if (b == pos) continue;  // `a::T::f(`: only T, followed by a name and `(`, is taken
    size_t m = pos + 2;
    if (m < text.size() && text[m] == '~') ++m;
    size_t e = m;
    while (e < text.size() && IsIdent(text[e])) ++e;
    if (e == m) continue;
    size_t open = e;
    while (open < text.size() && std::isspace(static_cast<unsigned char>(text[open]))) ++open;
    if (open >= text.size() || text[open] != '(') continue;
    size_t close;
    Parenthesized(text, open, &close);
    if (close == std::string_view::npos) continue;
    size_t next = text.find_first_of(";{}", close);
    if (next != std::string_view::npos && text[next] == '{') out->insert(std::string(text.substr(b, pos - b)));
  }
}

// A function definition `name(params) [const] [noexcept] {` found by scanning back from the `{`
// (parameters may hold one level of nested parentheses). Calls `found(qualified, params)`.
template <typename Found>
void ForEachDefinition(std::string_view t, Found found) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t brace = t.find('{'); brace != std::string_view::npos; brace = t.find('{', brace + 1)) {
    size_t i = brace;
    auto skip_space = [&] {
      while (i > 0 && space(t[i - 1])) --i;
    };
    auto drop_word = [&](std::string_view w) {
      if (i >= w.size() && t.substr(i - w.size(), w.size()) == w) {
        i -= w.size();
        skip_space();
      }
    };
    skip_space();
    size_t before_words = i;
    drop_word("noexcept");
    drop_word("const");
    if (i == 0 || t[i - 1] != ')') {
      i = before_words;  // "const"/"noexcept" may end an identifier: no definition then either
      continue;
    }
    size_t close = i - 1;
    int depth = 0;
    size_t open = std::string_view::npos;
    for (size_t j = close; j-- > 0;) {
      char c = t[j];
      if (c == ')') {
        if (++depth > 1) break;
      } else if (c == '(') {
        if (depth == 0) {
          open = j;
          break;
        }
        --depth;
      }
    }
    if (open == std::string_view::npos) continue;
    size_t e = open;
    while (e > 0 && space(t[e - 1])) --e;
    size_t b = e;
    for (;;) {
      size_t s = b;
      while (s > 0 && ident(t[s - 1])) --s;
      while (s < b && std::isdigit(static_cast<unsigned char>(t[s]))) ++s;  // names start with a letter or _
      if (s == b) break;
      b = s;
      if (b >= 3 && t[b - 1] == ':' && t[b - 2] == ':' && ident(t[b - 3]) &&
          !std::isdigit(static_cast<unsigned char>(t[b - 3]))) {
        // keep going only when an identifier precedes the `::`
        size_t k = b - 2;
        size_t s2 = k;
        while (s2 > 0 && ident(t[s2 - 1])) --s2;
        while (s2 < k && std::isdigit(static_cast<unsigned char>(t[s2]))) ++s2;
        if (s2 == k) break;
        b = k;
        continue;
      }
      break;
    }
    if (b == e) continue;
    found(t.substr(b, e - b), t.substr(open + 1, close - open - 1));
  }
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
  scan.path = display_path;
  // Everything below reads the source without its comments (commas inside them are no
  // separators, and "CUDA" in a licence header or a note is no CUDA code).
  std::string owned = BlankComments(text);
  text = owned;
  {
    std::string_view ext =
        std::string_view(display_path).substr(std::min(display_path.size(), display_path.rfind('.')));
    scan.mentions_cuda = ext == ".cu" || ext == ".cuh" || text.find("__global__") != std::string_view::npos;
    for (size_t i = 0; !scan.mentions_cuda && i + 4 <= text.size(); ++i) {
      if ((text[i] | 0x20) == 'c' && (text[i + 1] | 0x20) == 'u' && (text[i + 2] | 0x20) == 'd' &&
          (text[i + 3] | 0x20) == 'a')
        scan.mentions_cuda = true;
    }
  }
  // Function definitions: `name(params) {` or `name(params) const {` — enough to count arguments.
  // A scan back from each `{` (a regular expression over the whole file took most of the time of
  // a library with many kernels).
  ForEachDefinition(text, [&](std::string_view qualified_view, std::string_view params) {
    std::string qualified(qualified_view);
    size_t colon = qualified.rfind("::");
    std::string name = colon == std::string::npos ? qualified : qualified.substr(colon + 2);
    if (name == "if" || name == "for" || name == "while" || name == "switch" || name == "catch" ||
        name == "PYBIND11_MODULE" || name.rfind("TORCH_LIBRARY", 0) == 0)
      return;
    int count = CountParameters(params);
    scan.functions.emplace(name, count);
    for (const std::string* key : {&name, &qualified}) {
      if (key == &qualified && colon == std::string::npos) break;
      auto [at, fresh] = scan.function_ranges.emplace(*key, std::make_pair(count, count));
      if (!fresh) at->second = {std::min(at->second.first, count), std::max(at->second.second, count)};
    }
    if (colon != std::string::npos) {
      scan.functions.emplace(qualified, count);
      std::string owner = qualified.substr(0, colon);
      size_t c2 = owner.rfind("::");
      scan.classes.insert(c2 == std::string::npos ? owner : owner.substr(c2 + 2));
    }
  });
  MemberDefinitionClasses(text, &scan.classes);
  struct Macro {
    const char* name;
    bool torch_library;
  };
  static constexpr Macro kMacros[] = {{"PYBIND11_MODULE", false},
                                      {"TORCH_LIBRARY_FRAGMENT", true},
                                      {"TORCH_LIBRARY_IMPL", true},
                                      {"TORCH_LIBRARY", true}};
  static const std::regex kPyClass(R"re(py::class_\s*<\s*([\w:]+)[^(;]*>\s*\(\s*\w+\s*,\s*"(\w+)")re");
  static const std::regex kTorchDef(
      R"re(\.\s*def\s*\(\s*(?:TORCH_SELECTIVE_SCHEMA\s*\()?\s*"(\w+)(?:\.\w+)?\s*(\(([^"]*)\))?[^"]*"\s*(?:\)\s*)?(?:,\s*&?\s*([\w:]+))?)re");
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
      std::vector<std::string> modules;  // PYBIND11_MODULE(name, m) with a literal name
      if (!macro.torch_library && !ns.empty() && ns != "TORCH_EXTENSION_NAME" &&
          std::all_of(ns.begin(), ns.end(), [](char c) { return IsIdent(c); })) {
        modules.push_back(ns);
        scan.module_names.push_back(ns);
      }
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
        op.modules = modules;
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
          add((*it)[2], -1, "class:" + (*it)[1].str(), static_cast<size_t>(it->position()));
      } else {
        for (auto it = std::sregex_iterator(body.begin(), body.end(), kTorchDef); it != std::sregex_iterator(); ++it) {
          int min_args = -1, count = -1;
          std::vector<std::string> names;
          if ((*it)[2].matched) SignatureFromParams((*it)[3].str(), &min_args, &count, &names);
          CustomOp& op =
              add((*it)[1], count, (*it)[4].matched ? (*it)[4].str() : "", static_cast<size_t>(it->position()));
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

namespace {

std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

// Whether build source `src` (as written in a build script) names the file at `path`.
bool SourceNames(std::string_view src, std::string_view path) {
  while (src.rfind("./", 0) == 0) src.remove_prefix(2);
  if (src.empty() || src.size() > path.size()) return false;
  if (path.compare(path.size() - src.size(), src.size(), src) != 0) return false;
  return path.size() == src.size() || path[path.size() - src.size() - 1] == '/';
}

}  // namespace

void CustomOpTable::Link(std::vector<CppScan> scans, const std::vector<ExtensionBuild>& builds) {
  // Name → fewest and most parameters over its definitions in every source.
  std::unordered_map<std::string, std::pair<int, int>> functions;
  // Name (qualified and last) → the scans defining it; class name → scans defining its members.
  std::unordered_map<std::string, std::vector<size_t>> defined_in, class_in;
  bool any_cuda = false;
  // Dispatch keys each TORCH_LIBRARY op is implemented for ("ns::name" → keys).
  std::unordered_map<std::string, std::vector<std::string>> keys;
  std::unordered_set<std::string> cuda_dirs;  // folders holding a source that mentions CUDA
  std::unordered_map<std::string, size_t> basename_count;
  for (size_t si = 0; si < scans.size(); ++si) {
    const auto& s = scans[si];
    for (const auto& [name, range] : s.function_ranges) {
      auto [at, fresh] = functions.emplace(name, range);
      if (!fresh) at->second = {std::min(at->second.first, range.first), std::max(at->second.second, range.second)};
      defined_in[name].push_back(si);
    }
    for (const auto& c : s.classes) class_in[c].push_back(si);
    any_cuda |= s.mentions_cuda;
    if (s.mentions_cuda) cuda_dirs.insert(DirOf(s.path));
    ++basename_count[s.path.substr(s.path.rfind('/') + 1)];
    for (const auto& op : s.ops)
      if (!op.dispatch_key.empty()) keys[op.ns + "::" + op.name].push_back(op.dispatch_key);
  }
  // The builds that compile each scan's file.
  std::vector<std::vector<const ExtensionBuild*>> built_by(scans.size());
  for (const auto& b : builds) {
    for (const auto& src : b.sources) {
      bool bare = src.find('/') == std::string::npos;
      for (size_t si = 0; si < scans.size(); ++si) {
        const std::string& path = scans[si].path;
        if (!SourceNames(src, path)) continue;
        if (bare && basename_count[path.substr(path.rfind('/') + 1)] > 1) continue;  // ambiguous
        built_by[si].push_back(&b);
      }
    }
  }
  // Whether the source(s) defining `symbol` (registered from scan `si`) mention CUDA; -1 when no
  // definition was found.
  auto defining_cuda = [&](size_t si, const std::string& symbol) -> int {
    if (symbol.empty()) return -1;
    const std::vector<size_t>* where = nullptr;
    if (symbol.rfind("class:", 0) == 0) {
      std::string cls = symbol.substr(6);
      size_t colon = cls.rfind("::");
      if (colon != std::string::npos) cls = cls.substr(colon + 2);
      auto it = class_in.find(cls);
      if (it != class_in.end()) where = &it->second;
    } else {
      auto it = defined_in.find(symbol);
      if (it == defined_in.end()) {
        size_t colon = symbol.rfind("::");
        if (colon != std::string::npos) it = defined_in.find(symbol.substr(colon + 2));
      }
      if (it != defined_in.end()) where = &it->second;
    }
    if (!where || where->empty()) return -1;
    // The registering file's own definition is the one it binds.
    if (std::find(where->begin(), where->end(), si) != where->end()) return scans[si].mentions_cuda ? 1 : 0;
    for (size_t d : *where)
      if (scans[d].mentions_cuda) return 1;
    return 0;
  };
  auto cpu_only = [&](size_t si, const CustomOp& op, const std::string& symbol) {
    bool cuda_build = false, cpu_build = false;
    for (const ExtensionBuild* b : built_by[si]) {
      cuda_build |= b->kind == ExtensionBuild::Kind::kCuda;
      cpu_build |= b->kind == ExtensionBuild::Kind::kCpu;
    }
    if (cuda_build) return false;
    if (cpu_build) return true;
    if (!any_cuda) return true;  // no C++ source of the project mentions CUDA
    // TORCH_LIBRARY_IMPL keys: a CUDA operator has a CUDA kernel (CUDA, AutogradCUDA, ...);
    // CPU, Meta, Functionalize or composite kernels alone make none.
    auto it = keys.find(op.ns + "::" + op.name);
    if (!op.ns.empty() && it != keys.end())
      return std::none_of(it->second.begin(), it->second.end(), [](const std::string& k) { return IsCudaKey(k); });
    if (scans[si].mentions_cuda) return false;
    int defined = defining_cuda(si, symbol);
    if (defined >= 0) return defined == 0;
    // Nothing says: a binding next to CUDA sources is taken for a CUDA extension.
    return cuda_dirs.count(DirOf(scans[si].path)) == 0;
  };
  // Ops with a kernel for the target: `<op>_<device>` functions and sources, and
  // TORCH_LIBRARY_IMPL registrations under the target's dispatch keys.
  std::unordered_set<std::string> target_kernels;
  auto lower = [](std::string t) {
    for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return t;
  };
  const std::string device_suffix = target_device.empty() ? std::string() : "_" + lower(target_device);
  auto add_target_kernel = [&](std::string name) {
    name = lower(std::move(name));
    if (device_suffix.empty() || name.size() <= device_suffix.size() ||
        name.compare(name.size() - device_suffix.size(), device_suffix.size(), device_suffix) != 0)
      return;
    target_kernels.insert(name.substr(0, name.size() - device_suffix.size()));
  };
  for (const auto& s : scans) {
    for (const auto& [name, range] : s.function_ranges)
      add_target_kernel(name.substr(name.rfind(':') == std::string::npos ? 0 : name.rfind(':') + 1));
    std::string base = s.path.substr(s.path.rfind('/') + 1);
    add_target_kernel(base.substr(0, base.find('.')));
  }
  auto is_target_key = [&](const std::string& key) {
    return !target_device.empty() &&
           (key == "PrivateUse1" || key == "AutogradPrivateUse1" || lower(key) == lower(target_device) ||
            lower(key) == "autograd" + lower(target_device));
  };
  auto has_target_kernel = [&](const CustomOp& op) {
    if (target_device.empty()) return false;
    std::string name = lower(op.name);
    if (target_kernels.count(name)) return true;
    for (const char* suffix : {"_cuda", "_gpu"}) {
      std::string_view sv(suffix);
      if (name.size() > sv.size() && name.compare(name.size() - sv.size(), sv.size(), sv) == 0 &&
          target_kernels.count(name.substr(0, name.size() - sv.size())))
        return true;
    }
    auto it = keys.find(op.ns + "::" + op.name);
    return !op.ns.empty() && it != keys.end() && std::any_of(it->second.begin(), it->second.end(), is_target_key);
  };
  std::vector<CustomOp> merged;
  for (const auto& b : builds) {
    for (const auto& fn : b.inline_functions) {
      CustomOp op;
      op.name = fn;
      op.modules.push_back(b.module);
      op.file = b.file;
      op.line = b.line;
      op.how = "load_inline";
      (b.kind == ExtensionBuild::Kind::kCuda ? merged : cpu_ops).push_back(std::move(op));
    }
  }
  for (size_t si = 0; si < scans.size(); ++si) {
    auto& s = scans[si];
    for (size_t i = 0; i < s.ops.size(); ++i) {
      CustomOp& op = s.ops[i];
      const std::string& symbol = s.symbols[i];
      if (op.arg_count < 0 && !symbol.empty() && symbol.rfind("class:", 0) != 0) {
        auto it = functions.find(symbol);
        if (it == functions.end()) {
          size_t colon = symbol.rfind("::");
          if (colon != std::string::npos) it = functions.find(symbol.substr(colon + 2));
        }
        // Several definitions of the name (a free function and a same-named member): any of
        // their arities may be the one bound.
        if (it != functions.end()) {
          op.min_args = it->second.first;
          op.arg_count = it->second.second;
        }
      }
      for (const ExtensionBuild* b : built_by[si])
        if (!b->module.empty() && std::find(op.modules.begin(), op.modules.end(), b->module) == op.modules.end())
          op.modules.push_back(b->module);
      if (cpu_only(si, op, symbol)) {
        cpu_ops.push_back(std::move(op));
        continue;
      }
      if (has_target_kernel(op)) {
        target_ops.push_back(std::move(op));
        continue;
      }
      merged.push_back(std::move(op));
    }
  }
  std::sort(merged.begin(), merged.end(), [](const CustomOp& a, const CustomOp& b) {
    return std::tie(a.name, a.ns, a.file, a.line) < std::tie(b.name, b.ns, b.file, b.line);
  });
  for (auto& op : merged) {
    auto it = by_name.find(op.name);
    if (it != by_name.end()) {
      // TORCH_LIBRARY: a def and its impls are one op (keep the known arg count). pybind11:
      // every extension module's registration is its own op (apex registers `forward` in a
      // dozen modules with different arities); only a repeat in the same file is merged.
      bool dup = false;
      for (size_t idx : it->second) {
        CustomOp& seen = ops[idx];
        if (seen.ns != op.ns || (op.ns.empty() && seen.file != op.file)) continue;
        if (seen.arg_count < 0) {
          seen.arg_count = op.arg_count;
          seen.min_args = op.min_args;
          seen.arg_names = op.arg_names;
        }
        dup = true;
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
      if (at == op.arg_names.end() || static_cast<size_t>(at - op.arg_names.begin()) < call.positional) return false;
    }
  }
  bool open = call.star || (call.double_star && !op.arg_names.empty());
  return open || given >= fewest;
}

}  // namespace

const CustomOp* CustomOpTable::Match(std::string_view name, const CallShape& call,
                                     std::string_view receiver_module) const {
  auto it = by_name.find(std::string(name));
  if (it == by_name.end()) return nullptr;
  const CustomOp* unplaced = nullptr;   // a fitting registration whose module is unknown
  const CustomOp* elsewhere = nullptr;  // a fitting registration of another, known module
  for (size_t idx : it->second) {
    const CustomOp& op = ops[idx];
    if (!Fits(op, call)) continue;
    if (receiver_module.empty()) return &op;
    if (op.modules.empty()) {
      if (!unplaced) unplaced = &op;
    } else if (std::find(op.modules.begin(), op.modules.end(), receiver_module) != op.modules.end()) {
      return &op;
    } else if (!elsewhere) {
      elsewhere = &op;
    }
  }
  (void)elsewhere;  // registered for another module: not this call
  return unplaced;
}

const CustomOp* CustomOpTable::MatchInModule(std::string_view name, const CallShape& call,
                                             std::string_view module) const {
  auto it = by_name.find(std::string(name));
  if (it == by_name.end() || module.empty()) return nullptr;
  for (size_t idx : it->second) {
    const CustomOp& op = ops[idx];
    if (std::find(op.modules.begin(), op.modules.end(), module) != op.modules.end() && Fits(op, call)) return &op;
  }
  return nullptr;
}

bool CustomOpTable::PythonMethodFits(std::string_view name, const CallShape& call) const {
  auto [b, e] = python_methods.equal_range(std::string(name));
  size_t given = call.positional + call.keywords.size();
  for (auto it = b; it != e; ++it) {
    auto [fewest, most] = it->second;
    if (call.star || call.double_star) return true;
    if (given >= static_cast<size_t>(fewest) && given <= static_cast<size_t>(most)) return true;
  }
  return false;
}

std::vector<ExtensionBuild> ScanExtensionBuilds(std::string_view text) {
  std::vector<ExtensionBuild> out;
  if (text.find("sources") == std::string_view::npos && text.find("Extension(") == std::string_view::npos) return out;
  struct Builder {
    std::string_view name;
    ExtensionBuild::Kind kind;
  };
  static constexpr Builder kBuilders[] = {{"CUDAExtension", ExtensionBuild::Kind::kCuda},
                                          {"CppExtension", ExtensionBuild::Kind::kCpu},
                                          {"Extension", ExtensionBuild::Kind::kUnknown},
                                          {"load", ExtensionBuild::Kind::kUnknown},
                                          {"load_inline", ExtensionBuild::Kind::kCpu}};
  auto is_source = [](std::string_view lit) {
    size_t dot = lit.rfind('.');
    if (dot == std::string_view::npos) return false;
    std::string_view ext = lit.substr(dot);
    if (lit.find('*') != std::string_view::npos || lit.find('{') != std::string_view::npos)
      return false;  // globs, templates
    return ext == ".cpp" || ext == ".cc" || ext == ".cxx" || ext == ".cu" || ext == ".c";
  };
  for (size_t pos = text.find('('); pos != std::string_view::npos; pos = text.find('(', pos + 1)) {
    size_t b = pos;
    while (b > 0 && IsIdent(text[b - 1])) --b;
    std::string_view callee = text.substr(b, pos - b);
    const Builder* builder = nullptr;
    for (const auto& k : kBuilders)
      if (callee == k.name) builder = &k;
    if (!builder) continue;
    size_t close;
    std::string_view inner = Parenthesized(text, pos, &close);
    if (close == std::string_view::npos) continue;
    ExtensionBuild build;
    build.kind = builder->kind;
    auto items = SplitTopLevel(inner);
    for (size_t i = 0; i < items.size(); ++i) {
      std::string_view item = items[i];
      std::string_view value = item;
      bool named = false;
      if (item.rfind("name", 0) == 0) {
        std::string_view rest = Trim(item.substr(4));
        if (!rest.empty() && rest.front() == '=') {
          value = Trim(rest.substr(1));
          named = true;
        }
      }
      if ((named || (i == 0 && build.module.empty())) && !value.empty() &&
          (value.front() == '"' || value.front() == '\'')) {
        size_t end = SkipLiteral(value, 0);
        std::string_view lit = value.substr(1, end >= 2 ? end - 2 : 0);
        if (!is_source(lit)) build.module = std::string(lit.substr(lit.rfind('.') + 1));
      }
    }
    // Every source-like string literal inside the call (lists, os.path.join fragments).
    for (size_t i = 0; i < inner.size(); ++i) {
      if (inner[i] != '"' && inner[i] != '\'') continue;
      size_t end = SkipLiteral(inner, i);
      std::string_view lit = inner.substr(i + 1, end >= i + 2 ? end - i - 2 : 0);
      if (is_source(lit)) build.sources.emplace_back(lit);
      i = end - 1;
    }
    if (callee == "load_inline") {
      // functions=["f", "g"] (or "f"): the bound functions; cuda_sources makes it a CUDA build.
      for (std::string_view item : items) {
        std::string_view key = item.substr(0, item.find('='));
        key = Trim(key);
        if (key == "cuda_sources") build.kind = ExtensionBuild::Kind::kCuda;
        if (key != "functions" || item.find('=') == std::string_view::npos) continue;
        std::string_view value = Trim(item.substr(item.find('=') + 1));
        for (size_t i = 0; i < value.size(); ++i) {
          if (value[i] != '"' && value[i] != '\'') continue;
          size_t end = SkipLiteral(value, i);
          if (end >= i + 2) build.inline_functions.emplace_back(value.substr(i + 1, end - i - 2));
          i = end - 1;
        }
      }
      build.sources.clear();
      if (build.module.empty() || build.inline_functions.empty()) continue;
      build.line = 1 + static_cast<uint32_t>(std::count(text.begin(), text.begin() + static_cast<long>(b), '\n'));
      out.push_back(std::move(build));
      continue;
    }
    // A CppExtension that compiles .cu files is a CUDA extension in all but name.
    if (build.kind == ExtensionBuild::Kind::kCpu &&
        std::any_of(build.sources.begin(), build.sources.end(),
                    [](const std::string& f) { return f.size() > 3 && f.compare(f.size() - 3, 3, ".cu") == 0; }))
      build.kind = ExtensionBuild::Kind::kCuda;
    if (build.kind == ExtensionBuild::Kind::kUnknown && build.module.empty()) continue;
    if (!build.sources.empty()) out.push_back(std::move(build));
  }
  return out;
}

}  // namespace portkit::analyse
