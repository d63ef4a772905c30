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

namespace {

// Whether a source (comments blanked) mentions CUDA in code: a .cu/.cuh file, `__global__`, or
// "cuda" in any letter case.
bool MentionsCuda(std::string_view text, const std::string& display_path) {
  std::string_view ext = std::string_view(display_path).substr(std::min(display_path.size(), display_path.rfind('.')));
  if (ext == ".cu" || ext == ".cuh" || text.find("__global__") != std::string_view::npos) return true;
  for (size_t i = 0; i + 4 <= text.size(); ++i) {
    if ((text[i] | 0x20) == 'c' && (text[i + 1] | 0x20) == 'u' && (text[i + 2] | 0x20) == 'd' &&
        (text[i + 3] | 0x20) == 'a')
      return true;
  }
  return false;
}

// Records one function definition `qualified(params) {` in the scan: its parameter count under
// its last name (and its qualified text), and the class a qualified name defines a member of.
void RecordDefinition(CppScan& scan, std::string_view qualified_view, std::string_view params) {
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
}

struct RegistrationMacro {
  const char* name;
  bool torch_library;
};

// What a pybind11 `.def("name", fn, ...)` says of its arguments: from its py::arg items, else
// from a lambda's parameters; and the bound function's symbol when `fn` names one.
struct BoundSignature {
  int min_args = -1, max_args = -1;
  std::vector<std::string> names;
  std::string symbol;
};

bool IsPyArg(std::string_view item) {
  bool is_arg = item.rfind("py::arg", 0) == 0 || item.rfind("pybind11::arg", 0) == 0 ||
                (item.size() > 3 && item.front() == '"' && item.find("\"_a") != std::string_view::npos);
  return is_arg && item.rfind("py::args", 0) != 0;
}

BoundSignature PybindSignature(const std::vector<std::string_view>& items) {
  BoundSignature sig;
  int py_args = 0, required = 0;
  for (size_t i = 2; i < items.size(); ++i) {
    std::string_view item = items[i];
    if (!IsPyArg(item)) continue;
    ++py_args;
    required += !HasDefault(item);
    sig.names.emplace_back(FirstString(item));
  }
  std::string_view fn = items[1];
  if (py_args > 0) {
    sig.min_args = required;
    sig.max_args = py_args;
  } else if (!fn.empty() && fn.front() == '[') {
    // A lambda: count its parameters.
    size_t p = fn.find('(');
    size_t pc;
    if (p != std::string_view::npos) {
      std::string_view params = Parenthesized(fn, p, &pc);
      if (pc != std::string_view::npos) sig.min_args = sig.max_args = CountParameters(params);
    }
  } else {
    while (!fn.empty() && (fn.front() == '&' || std::isspace(static_cast<unsigned char>(fn.front()))))
      fn.remove_prefix(1);
    size_t e = 0;
    while (e < fn.size() && (IsIdent(fn[e]) || fn[e] == ':')) ++e;
    sig.symbol = std::string(fn.substr(0, e));
  }
  return sig;
}

// The block of one registration macro (`PYBIND11_MODULE(name, m) {...}`,
// `TORCH_LIBRARY_IMPL(ns, KEY, m) {...}`) and the ops it adds to a scan.
class RegistrationBlock {
 public:
  RegistrationBlock(CppScan& scan, std::string_view text, const RegistrationMacro& macro, std::string ns,
                    std::vector<std::string> modules, std::string key, size_t block_offset)
      : scan_(scan),
        text_(text),
        macro_(macro),
        ns_(std::move(ns)),
        modules_(std::move(modules)),
        key_(std::move(key)),
        block_offset_(block_offset) {}

  // `<module>.def("name", fn, "doc", py::arg("x"), py::arg("y") = 1, ...)` and py::class_;
  // chained `.def` of a py::class_ (after a `)`) are methods, not module functions.
  void ScanPybind(const std::string& body) {
    static const std::regex kPyClass(R"re(py::class_\s*<\s*([\w:]+)[^(;]*>\s*\(\s*\w+\s*,\s*"(\w+)")re");
    std::string_view b(body);
    for (size_t d = b.find(".def"); d != std::string_view::npos; d = b.find(".def", d + 4)) PybindDef(b, d);
    for (auto it = std::sregex_iterator(body.begin(), body.end(), kPyClass); it != std::sregex_iterator(); ++it)
      Add((*it)[2], -1, "class:" + (*it)[1].str(), static_cast<size_t>(it->position()));
  }

  // `m.def("schema", fn)`, `m.impl("name", fn)`, `m.class_<T>("name")`.
  void ScanTorchLibrary(const std::string& body) {
    static const std::regex kTorchDef(
        R"re(\.\s*def\s*\(\s*(?:TORCH_SELECTIVE_SCHEMA\s*\()?\s*"(\w+)(?:\.\w+)?\s*(\(([^"]*)\))?[^"]*"\s*(?:\)\s*)?(?:,\s*&?\s*([\w:]+))?)re");
    static const std::regex kTorchImpl(R"re(\.\s*impl\s*\(\s*"(\w+)"\s*,\s*(?:TORCH_FN\s*\(\s*)?&?\s*([\w:]+))re");
    static const std::regex kTorchClass(R"re(\.\s*class_\s*<[^>]*>\s*\(\s*"(\w+)")re");
    for (auto it = std::sregex_iterator(body.begin(), body.end(), kTorchDef); it != std::sregex_iterator(); ++it) {
      int min_args = -1, count = -1;
      std::vector<std::string> names;
      if ((*it)[2].matched) SignatureFromParams((*it)[3].str(), &min_args, &count, &names);
      CustomOp& op = Add((*it)[1], count, (*it)[4].matched ? (*it)[4].str() : "", static_cast<size_t>(it->position()));
      op.min_args = min_args;
      op.arg_names = std::move(names);
    }
    for (auto it = std::sregex_iterator(body.begin(), body.end(), kTorchImpl); it != std::sregex_iterator(); ++it)
      Add((*it)[1], -1, (*it)[2], static_cast<size_t>(it->position()));
    for (auto it = std::sregex_iterator(body.begin(), body.end(), kTorchClass); it != std::sregex_iterator(); ++it)
      Add((*it)[1], -1, "", static_cast<size_t>(it->position()));
  }

 private:
  CustomOp& Add(std::string name, int count, std::string symbol, size_t rel) {
    CustomOp op;
    op.name = std::move(name);
    op.ns = macro_.torch_library ? ns_ : "";
    op.arg_count = count;
    op.dispatch_key = key_;
    op.file = scan_.path;
    op.line = LineOf(text_, block_offset_ + rel);
    op.how = macro_.name;
    op.modules = modules_;
    scan_.symbols.push_back(std::move(symbol));
    scan_.ops.push_back(std::move(op));
    return scan_.ops.back();
  }

  // The `.def` at `d` of the block, when it is a module function's registration.
  void PybindDef(std::string_view b, size_t d) {
    size_t prev = d;
    while (prev > 0 && std::isspace(static_cast<unsigned char>(b[prev - 1]))) --prev;
    if (prev == 0 || !IsIdent(b[prev - 1])) return;
    size_t open_paren = d + 4;
    while (open_paren < b.size() && std::isspace(static_cast<unsigned char>(b[open_paren]))) ++open_paren;
    if (open_paren >= b.size() || b[open_paren] != '(') return;
    size_t close_paren;
    std::string_view inner = Parenthesized(b, open_paren, &close_paren);
    if (close_paren == std::string_view::npos) return;
    auto items = SplitTopLevel(inner);
    if (items.size() < 2 || items[0].empty() || items[0].front() != '"') return;
    std::string_view name = FirstString(items[0]);
    if (name.empty()) return;
    BoundSignature sig = PybindSignature(items);
    CustomOp& op = Add(std::string(name), sig.max_args, sig.symbol, d);
    op.min_args = sig.min_args;
    op.arg_names = std::move(sig.names);
  }

  CppScan& scan_;
  std::string_view text_;
  const RegistrationMacro& macro_;
  std::string ns_;
  std::vector<std::string> modules_;
  std::string key_;
  size_t block_offset_;
};

// Every invocation of one registration macro in `text` and the ops its block registers.
void ScanMacro(std::string_view text, const RegistrationMacro& macro, CppScan& scan) {
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
    RegistrationBlock registrations(scan, text, macro, std::move(ns), std::move(modules), std::move(key), block_offset);
    if (macro.torch_library) registrations.ScanTorchLibrary(std::string(block));
    else registrations.ScanPybind(std::string(block));
    pos = after;
  }
}

}  // namespace

CppScan ScanCppSource(std::string_view text, const std::string& display_path) {
  CppScan scan;
  scan.path = display_path;
  // Everything below reads the source without its comments (commas inside them are no
  // separators, and "CUDA" in a licence header or a note is no CUDA code).
  std::string owned = BlankComments(text);
  text = owned;
  scan.mentions_cuda = MentionsCuda(text, display_path);
  // Function definitions: `name(params) {` or `name(params) const {` — enough to count arguments.
  // A scan back from each `{` (a regular expression over the whole file took most of the time of
  // a library with many kernels).
  ForEachDefinition(
      text, [&](std::string_view qualified, std::string_view params) { RecordDefinition(scan, qualified, params); });
  MemberDefinitionClasses(text, &scan.classes);
  static constexpr RegistrationMacro kMacros[] = {{"PYBIND11_MODULE", false},
                                                  {"TORCH_LIBRARY_FRAGMENT", true},
                                                  {"TORCH_LIBRARY_IMPL", true},
                                                  {"TORCH_LIBRARY", true}};
  for (const auto& macro : kMacros) ScanMacro(text, macro, scan);
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

namespace {

std::string Lower(std::string t) {
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return t;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// What Link knows of every scan at once: definitions, CUDA mentions, dispatch keys, the builds
// compiling each source and the ops with a kernel for the target; it decides where each op goes.
class LinkIndex {
 public:
  LinkIndex(const std::vector<CppScan>& scans, const std::vector<ExtensionBuild>& builds,
            const std::string& target_device)
      : scans_(scans), target_device_(target_device), built_by_(scans.size()) {
    IndexScans();
    MatchBuilds(builds);
    FindTargetKernels();
  }

  // Where op `op` (registered by scan `si` for function `symbol`) goes.
  enum class Place : uint8_t { kCpu, kTarget, kCuda };
  Place PlaceOf(size_t si, const CustomOp& op, const std::string& symbol) const {
    if (CpuOnly(si, op, symbol)) return Place::kCpu;
    if (HasTargetKernel(op)) return Place::kTarget;
    return Place::kCuda;
  }

  // Fills the arity of an op whose registration does not say from its function's definitions,
  // and adds the modules of the builds compiling its source.
  void Complete(size_t si, CustomOp& op, const std::string& symbol) const {
    if (op.arg_count < 0 && !symbol.empty() && symbol.rfind("class:", 0) != 0) {
      auto it = functions_.find(symbol);
      if (it == functions_.end()) {
        size_t colon = symbol.rfind("::");
        if (colon != std::string::npos) it = functions_.find(symbol.substr(colon + 2));
      }
      // Several definitions of the name (a free function and a same-named member): any of
      // their arities may be the one bound.
      if (it != functions_.end()) {
        op.min_args = it->second.first;
        op.arg_count = it->second.second;
      }
    }
    for (const ExtensionBuild* b : built_by_[si])
      if (!b->module.empty() && std::find(op.modules.begin(), op.modules.end(), b->module) == op.modules.end())
        op.modules.push_back(b->module);
  }

 private:
  void IndexScans() {
    for (size_t si = 0; si < scans_.size(); ++si) {
      const auto& s = scans_[si];
      for (const auto& [name, range] : s.function_ranges) {
        auto [at, fresh] = functions_.emplace(name, range);
        if (!fresh) at->second = {std::min(at->second.first, range.first), std::max(at->second.second, range.second)};
        defined_in_[name].push_back(si);
      }
      for (const auto& c : s.classes) class_in_[c].push_back(si);
      any_cuda_ |= s.mentions_cuda;
      if (s.mentions_cuda) cuda_dirs_.insert(DirOf(s.path));
      ++basename_count_[s.path.substr(s.path.rfind('/') + 1)];
      for (const auto& op : s.ops)
        if (!op.dispatch_key.empty()) keys_[op.ns + "::" + op.name].push_back(op.dispatch_key);
    }
  }

  // The builds that compile each scan's file.
  void MatchBuilds(const std::vector<ExtensionBuild>& builds) {
    for (const auto& b : builds) {
      for (const auto& src : b.sources) {
        bool bare = src.find('/') == std::string::npos;
        for (size_t si = 0; si < scans_.size(); ++si) {
          const std::string& path = scans_[si].path;
          if (!SourceNames(src, path)) continue;
          if (bare && basename_count_[path.substr(path.rfind('/') + 1)] > 1) continue;  // ambiguous
          built_by_[si].push_back(&b);
        }
      }
    }
  }

  // Ops with a kernel for the target: `<op>_<device>` functions and sources (TORCH_LIBRARY_IMPL
  // registrations under the target's dispatch keys are looked up in HasTargetKernel).
  void FindTargetKernels() {
    const std::string device_suffix = target_device_.empty() ? std::string() : "_" + Lower(target_device_);
    auto add_target_kernel = [&](std::string name) {
      name = Lower(std::move(name));
      if (device_suffix.empty() || !EndsWith(name, device_suffix)) return;
      target_kernels_.insert(name.substr(0, name.size() - device_suffix.size()));
    };
    for (const auto& s : scans_) {
      for (const auto& [name, range] : s.function_ranges)
        add_target_kernel(name.substr(name.rfind(':') == std::string::npos ? 0 : name.rfind(':') + 1));
      std::string base = s.path.substr(s.path.rfind('/') + 1);
      add_target_kernel(base.substr(0, base.find('.')));
    }
  }

  // The scans defining `symbol` (a function, or "class:T" for a class's members), or null.
  const std::vector<size_t>* DefinersOf(const std::string& symbol) const {
    if (symbol.rfind("class:", 0) == 0) {
      std::string cls = symbol.substr(6);
      size_t colon = cls.rfind("::");
      if (colon != std::string::npos) cls = cls.substr(colon + 2);
      auto it = class_in_.find(cls);
      return it == class_in_.end() ? nullptr : &it->second;
    }
    auto it = defined_in_.find(symbol);
    if (it == defined_in_.end()) {
      size_t colon = symbol.rfind("::");
      if (colon != std::string::npos) it = defined_in_.find(symbol.substr(colon + 2));
    }
    return it == defined_in_.end() ? nullptr : &it->second;
  }

  // Whether the source(s) defining `symbol` (registered from scan `si`) mention CUDA; -1 when no
  // definition was found.
  int DefiningCuda(size_t si, const std::string& symbol) const {
    if (symbol.empty()) return -1;
    const std::vector<size_t>* where = DefinersOf(symbol);
    if (!where || where->empty()) return -1;
    // The registering file's own definition is the one it binds.
    if (std::find(where->begin(), where->end(), si) != where->end()) return scans_[si].mentions_cuda ? 1 : 0;
    for (size_t d : *where)
      if (scans_[d].mentions_cuda) return 1;
    return 0;
  }

  bool CpuOnly(size_t si, const CustomOp& op, const std::string& symbol) const {
    bool cuda_build = false, cpu_build = false;
    for (const ExtensionBuild* b : built_by_[si]) {
      cuda_build |= b->kind == ExtensionBuild::Kind::kCuda;
      cpu_build |= b->kind == ExtensionBuild::Kind::kCpu;
    }
    if (cuda_build) return false;
    if (cpu_build) return true;
    if (!any_cuda_) return true;  // no C++ source of the project mentions CUDA
    // TORCH_LIBRARY_IMPL keys: a CUDA operator has a CUDA kernel (CUDA, AutogradCUDA, ...);
    // CPU, Meta, Functionalize or composite kernels alone make none.
    auto it = keys_.find(op.ns + "::" + op.name);
    if (!op.ns.empty() && it != keys_.end())
      return std::none_of(it->second.begin(), it->second.end(), [](const std::string& k) { return IsCudaKey(k); });
    if (scans_[si].mentions_cuda) return false;
    int defined = DefiningCuda(si, symbol);
    if (defined >= 0) return defined == 0;
    // Nothing says: a binding next to CUDA sources is taken for a CUDA extension.
    return cuda_dirs_.count(DirOf(scans_[si].path)) == 0;
  }

  bool IsTargetKey(const std::string& key) const {
    return !target_device_.empty() &&
           (key == "PrivateUse1" || key == "AutogradPrivateUse1" || Lower(key) == Lower(target_device_) ||
            Lower(key) == "autograd" + Lower(target_device_));
  }

  bool HasTargetKernel(const CustomOp& op) const {
    if (target_device_.empty()) return false;
    std::string name = Lower(op.name);
    if (target_kernels_.count(name)) return true;
    for (std::string_view suffix : {"_cuda", "_gpu"}) {
      if (EndsWith(name, suffix) && target_kernels_.count(name.substr(0, name.size() - suffix.size()))) return true;
    }
    auto it = keys_.find(op.ns + "::" + op.name);
    return !op.ns.empty() && it != keys_.end() &&
           std::any_of(it->second.begin(), it->second.end(), [this](const std::string& k) { return IsTargetKey(k); });
  }

  const std::vector<CppScan>& scans_;
  const std::string& target_device_;
  // Name → fewest and most parameters over its definitions in every source.
  std::unordered_map<std::string, std::pair<int, int>> functions_;
  // Name (qualified and last) → the scans defining it; class name → scans defining its members.
  std::unordered_map<std::string, std::vector<size_t>> defined_in_, class_in_;
  bool any_cuda_ = false;
  // Dispatch keys each TORCH_LIBRARY op is implemented for ("ns::name" → keys).
  std::unordered_map<std::string, std::vector<std::string>> keys_;
  std::unordered_set<std::string> cuda_dirs_;  // folders holding a source that mentions CUDA
  std::unordered_map<std::string, size_t> basename_count_;
  std::vector<std::vector<const ExtensionBuild*>> built_by_;
  std::unordered_set<std::string> target_kernels_;
};

// Adds a CUDA op to the table, or merges it into an earlier registration of the same op.
void AddOrMerge(CustomOpTable& table, CustomOp op) {
  auto it = table.by_name.find(op.name);
  if (it != table.by_name.end()) {
    // TORCH_LIBRARY: a def and its impls are one op (keep the known arg count). pybind11:
    // every extension module's registration is its own op (apex registers `forward` in a
    // dozen modules with different arities); only a repeat in the same file is merged.
    bool dup = false;
    for (size_t idx : it->second) {
      CustomOp& seen = table.ops[idx];
      if (seen.ns != op.ns || (op.ns.empty() && seen.file != op.file)) continue;
      if (seen.arg_count < 0) {
        seen.arg_count = op.arg_count;
        seen.min_args = op.min_args;
        seen.arg_names = op.arg_names;
      }
      dup = true;
    }
    if (dup) return;
  }
  table.Add(std::move(op));
}

}  // namespace

void CustomOpTable::Link(std::vector<CppScan> scans, const std::vector<ExtensionBuild>& builds) {
  const LinkIndex index(scans, builds, target_device);
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
      index.Complete(si, op, symbol);
      switch (index.PlaceOf(si, op, symbol)) {
        case LinkIndex::Place::kCpu: cpu_ops.push_back(std::move(op)); break;
        case LinkIndex::Place::kTarget: target_ops.push_back(std::move(op)); break;
        case LinkIndex::Place::kCuda: merged.push_back(std::move(op)); break;
      }
    }
  }
  std::sort(merged.begin(), merged.end(), [](const CustomOp& a, const CustomOp& b) {
    return std::tie(a.name, a.ns, a.file, a.line) < std::tie(b.name, b.ns, b.file, b.line);
  });
  for (auto& op : merged) AddOrMerge(*this, std::move(op));
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

namespace {

struct ExtensionBuilder {
  std::string_view name;
  ExtensionBuild::Kind kind;
};

// The builder a call at `open` (the `(`) invokes, or null; `*begin` is where the callee starts.
const ExtensionBuilder* BuilderCalledAt(std::string_view text, size_t open, size_t* begin) {
  static constexpr ExtensionBuilder kBuilders[] = {{"CUDAExtension", ExtensionBuild::Kind::kCuda},
                                                   {"CppExtension", ExtensionBuild::Kind::kCpu},
                                                   {"Extension", ExtensionBuild::Kind::kUnknown},
                                                   {"load", ExtensionBuild::Kind::kUnknown},
                                                   {"load_inline", ExtensionBuild::Kind::kCpu}};
  size_t b = open;
  while (b > 0 && IsIdent(text[b - 1])) --b;
  *begin = b;
  std::string_view callee = text.substr(b, open - b);
  const ExtensionBuilder* builder = nullptr;
  for (const auto& k : kBuilders)
    if (callee == k.name) builder = &k;
  return builder;
}

bool IsSourceLiteral(std::string_view lit) {
  size_t dot = lit.rfind('.');
  if (dot == std::string_view::npos) return false;
  std::string_view ext = lit.substr(dot);
  if (lit.find('*') != std::string_view::npos || lit.find('{') != std::string_view::npos)
    return false;  // globs, templates
  return ext == ".cpp" || ext == ".cc" || ext == ".cxx" || ext == ".cu" || ext == ".c";
}

// The extension's module name: the last component of its `name=` (or first positional) string.
std::string ModuleNameOf(const std::vector<std::string_view>& items) {
  std::string module;
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
    if ((named || (i == 0 && module.empty())) && !value.empty() && (value.front() == '"' || value.front() == '\'')) {
      size_t end = SkipLiteral(value, 0);
      std::string_view lit = value.substr(1, end >= 2 ? end - 2 : 0);
      if (!IsSourceLiteral(lit)) module = std::string(lit.substr(lit.rfind('.') + 1));
    }
  }
  return module;
}

// Calls `found(content)` for each string literal in `text`; a literal's content may be empty
// when `with_empty`.
template <typename Found>
void ForEachStringLiteral(std::string_view text, bool with_empty, Found found) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '"' && text[i] != '\'') continue;
    size_t end = SkipLiteral(text, i);
    if (with_empty || end >= i + 2) found(text.substr(i + 1, end >= i + 2 ? end - i - 2 : 0));
    i = end - 1;
  }
}

// load_inline(functions=["f", "g"] (or "f"), cuda_sources=...): the bound functions; cuda_sources
// makes it a CUDA build.
void ReadInlineBuild(const std::vector<std::string_view>& items, ExtensionBuild& build) {
  for (std::string_view item : items) {
    std::string_view key = item.substr(0, item.find('='));
    key = Trim(key);
    if (key == "cuda_sources") build.kind = ExtensionBuild::Kind::kCuda;
    if (key != "functions" || item.find('=') == std::string_view::npos) continue;
    std::string_view value = Trim(item.substr(item.find('=') + 1));
    ForEachStringLiteral(value, false, [&](std::string_view f) { build.inline_functions.emplace_back(f); });
  }
  build.sources.clear();
}

bool CompilesCuda(const ExtensionBuild& build) {
  return std::any_of(build.sources.begin(), build.sources.end(),
                     [](const std::string& f) { return f.size() > 3 && f.compare(f.size() - 3, 3, ".cu") == 0; });
}

}  // namespace

std::vector<ExtensionBuild> ScanExtensionBuilds(std::string_view text) {
  std::vector<ExtensionBuild> out;
  if (text.find("sources") == std::string_view::npos && text.find("Extension(") == std::string_view::npos) return out;
  for (size_t pos = text.find('('); pos != std::string_view::npos; pos = text.find('(', pos + 1)) {
    size_t b;
    const ExtensionBuilder* builder = BuilderCalledAt(text, pos, &b);
    if (!builder) continue;
    size_t close;
    std::string_view inner = Parenthesized(text, pos, &close);
    if (close == std::string_view::npos) continue;
    ExtensionBuild build;
    build.kind = builder->kind;
    auto items = SplitTopLevel(inner);
    build.module = ModuleNameOf(items);
    // Every source-like string literal inside the call (lists, os.path.join fragments).
    ForEachStringLiteral(inner, true, [&](std::string_view lit) {
      if (IsSourceLiteral(lit)) build.sources.emplace_back(lit);
    });
    if (builder->name == "load_inline") {
      ReadInlineBuild(items, build);
      if (build.module.empty() || build.inline_functions.empty()) continue;
      build.line = 1 + static_cast<uint32_t>(std::count(text.begin(), text.begin() + static_cast<long>(b), '\n'));
      out.push_back(std::move(build));
      continue;
    }
    // A CppExtension that compiles .cu files is a CUDA extension in all but name.
    if (build.kind == ExtensionBuild::Kind::kCpu && CompilesCuda(build)) build.kind = ExtensionBuild::Kind::kCuda;
    if (build.kind == ExtensionBuild::Kind::kUnknown && build.module.empty()) continue;
    if (!build.sources.empty()) out.push_back(std::move(build));
  }
  return out;
}

}  // namespace portkit::analyse
