#include "analyse/source_files.h"

#include <cctype>

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "core/atomic_file.h"
#include "core/input_files.h"

namespace portkit::analyse {
namespace fs = std::filesystem;
namespace {

bool IsCppSource(const fs::path& p) {
  std::string ext = p.extension().string();
  return ext == ".cpp" || ext == ".cc" || ext == ".cu" || ext == ".cuh" || ext == ".cxx";
}

class Walker {
 public:
  Walker(const fs::path& root, std::string prefix, const std::vector<fs::path>& exclude,
         SourceSet& out)
      : root_(root), prefix_(std::move(prefix)), out_(out), exclude_(exclude) {
    std::error_code ec;
    root_is_package_ = fs::exists(root / "__init__.py", ec);
  }

  /// Links are never followed (docs/safety.md): listed in `links` with a note, like FIFOs and
  /// earlier portkit outputs inside the input.
  void Walk() {
    WalkOptions options;
    options.exclude = exclude_;
    options.skip_hidden_folders = true;
    options.skip_folder_names = {"__pycache__", "node_modules"};
    for (auto& e : WalkInputTree(root_, options)) {
      switch (e.kind) {
        case InputEntry::Kind::kFile:
          if (e.path.extension() == ".py") AddPython(e.path, e.rel);
          else if (IsCppSource(e.path)) out_.cpp.push_back({e.path, Display(e.rel), e.rel, "", {}, false});
          else out_.others.push_back({e.path, Display(e.rel), e.rel, "", {}, false});
          break;
        case InputEntry::Kind::kLink:
          Problem(e.rel, "symlink", e.note);
          out_.links.push_back({e.path, Display(e.rel), e.rel, "", {}, false});
          break;
        case InputEntry::Kind::kSpecial:
          Problem(e.rel, "skipped", e.note);
          break;
        case InputEntry::Kind::kOutput:
          Problem(e.rel, "portkit_output", e.note);
          break;
        case InputEntry::Kind::kUnreadable:
          Problem(e.rel, "unreadable", e.note);
          break;
      }
    }
  }

 private:
  std::string Display(const std::string& rel) const {
    return prefix_.empty() ? rel : prefix_ + "/" + rel;
  }

  void Problem(const std::string& rel, const char* kind, std::string message) {
    out_.problems.push_back({Display(rel), 0, 0, kind, std::move(message)});
  }

  void AddPython(const fs::path& path, const std::string& rel) {
    SourceFile f;
    f.path = path;
    f.display = Display(rel);
    f.rel = rel;
    std::string mod = rel.substr(0, rel.size() - 3);
    std::replace(mod.begin(), mod.end(), '/', '.');
    if (mod == "__init__" || (mod.size() > 9 && mod.compare(mod.size() - 9, 9, ".__init__") == 0)) {
      f.is_package = true;
      mod = mod == "__init__" ? "" : mod.substr(0, mod.size() - 9);
    }
    std::string pkg = root_.filename().string();
    if (root_is_package_ && !pkg.empty()) {
      // The root is itself a package: modules import each other as pkg.x (and often as x).
      std::string canonical = mod.empty() ? pkg : pkg + "." + mod;
      if (!mod.empty()) f.aliases.push_back(mod);
      mod = canonical;
    }
    if (mod.empty()) mod = "__main__";
    f.module = mod;
    out_.python.push_back(std::move(f));
  }

  fs::path root_;
  std::string prefix_;
  SourceSet& out_;
  std::vector<fs::path> exclude_;
  bool root_is_package_ = false;
};

}  // namespace

SourceSet DiscoverSources(const fs::path& root, const std::string& display_prefix,
                          const std::vector<fs::path>& exclude, size_t /*max_bytes*/) {
  SourceSet out;
  Walker(root, display_prefix, exclude, out).Walk();
  return out;
}

std::pair<uint32_t, uint32_t> FirstInvalidUtf8(std::string_view s) {
  uint32_t line = 1, col = 1;
  size_t i = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size()) {
    unsigned char c = p[i];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      if (c == '\n') ++line, col = 0;
      ++i, ++col;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return {line, col};
    }
    if (i + len > s.size()) return {line, col};
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return {line, col};
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return {line, col};
    i += len;
    ++col;
  }
  return {0, 0};
}

std::string DeclaredEncoding(std::string_view text) {
  size_t start = 0;
  for (int line = 0; line < 2 && start <= text.size(); ++line) {
    size_t end = text.find('\n', start);
    std::string_view l = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    size_t b = l.find_first_not_of(" \t\f");
    if (b != std::string_view::npos && l[b] == '#') {
      size_t c = l.find("coding", b);
      if (c != std::string_view::npos && c + 6 < l.size() && (l[c + 6] == ':' || l[c + 6] == '=')) {
        size_t v = c + 7;
        while (v < l.size() && (l[v] == ' ' || l[v] == '\t')) ++v;
        size_t e = v;
        while (e < l.size() && (std::isalnum(static_cast<unsigned char>(l[e])) || l[e] == '-' || l[e] == '_' || l[e] == '.')) ++e;
        std::string name(l.substr(v, e - v));
        for (char& ch : name) ch = ch == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        return name;
      }
    } else if (b != std::string_view::npos) {
      return {};  // code before a coding line: PEP 263 lines must come first
    }
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return {};
}

namespace {

// Exact Latin-1 names of Python's codec registry (cp1252 differs in 0x80–0x9F, so it is not one).
bool IsLatin1Name(const std::string& n) {
  return n == "latin-1" || n == "latin1" || n == "iso-8859-1" || n == "iso8859-1" || n == "l1" ||
         n == "cp819" || n == "iso-latin-1" || n == "latin";
}

std::string Latin1ToUtf8(std::string_view in) {
  std::string out;
  out.reserve(in.size() + in.size() / 8);
  for (unsigned char c : in) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

}  // namespace

// "58.0": one decimal, rounded down, so a file just over the limit never reads as equal to it.
static std::string MiB(uint64_t bytes) {
  uint64_t tenths = bytes * 10 / (uint64_t{1} << 20);
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10);
}

std::string DecodeDeclaredLatin1(std::string text) {
  if (FirstInvalidUtf8(text).first != 0 && IsLatin1Name(DeclaredEncoding(text))) return Latin1ToUtf8(text);
  return text;
}

Expected<std::string> LoadPythonSource(const SourceFile& f, size_t max_bytes, bool decode_latin1) {
  std::error_code ec;
  auto size = fs::file_size(f.path, ec);
  if (ec) return IoError(f.display + ": cannot read: " + ec.message());
  // Checked before anything is read: a parse tree takes 60-75 times its source (docs/safety.md).
  if (size > max_bytes)
    return InvalidArgument(f.display + ": over the limit: " + MiB(size) + " MiB, more than the " +
                           std::to_string(max_bytes >> 20) +
                           " MiB a Python file may have; not analysed. --max-file-mb raises the limit");
  auto text = ReadFile(f.path);
  if (!text.ok()) return IoError(f.display + ": cannot read: " + text.status().message());
  if (std::memchr(text->data(), '\0', text->size()))
    return InvalidArgument(f.display + ": skipped: binary file (contains NUL bytes)");
  auto [line, col] = FirstInvalidUtf8(*text);
  if (line != 0 && decode_latin1 && IsLatin1Name(DeclaredEncoding(*text))) {
    *text = Latin1ToUtf8(*text);
    line = 0;
  }
  if (line != 0)
    return InvalidArgument(f.display + ":" + std::to_string(line) + ":" + std::to_string(col) +
                           ": skipped: not valid UTF-8 (convert the file to UTF-8)");
  // A BOM is kept: the parser leaves it out, and every copy writes the file's own bytes.
  return std::move(*text);
}

}  // namespace portkit::analyse
