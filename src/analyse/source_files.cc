#include "analyse/source_files.h"

#include <cctype>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
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
  Walker(const fs::path& root, std::string prefix, const std::vector<fs::path>& exclude, SourceSet& out)
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
        case InputEntry::Kind::kSpecial: Problem(e.rel, "skipped", e.note); break;
        case InputEntry::Kind::kOutput: Problem(e.rel, "portkit_output", e.note); break;
        case InputEntry::Kind::kUnreadable: Problem(e.rel, "unreadable", e.note); break;
      }
    }
  }

 private:
  std::string Display(const std::string& rel) const { return prefix_.empty() ? rel : prefix_ + "/" + rel; }

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

SourceSet DiscoverSources(const fs::path& root, const std::string& display_prefix, const std::vector<fs::path>& exclude,
                          size_t /*max_bytes*/) {
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
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return {line, col};
    i += len;
    ++col;
  }
  return {0, 0};
}

std::string DeclaredEncoding(std::string_view text) {
  size_t start = 0;
  for (int line = 0; line < 2 && start <= text.size(); ++line) {
    size_t end = text.find_first_of("\r\n", start);  // a lone CR ends a line too, as for CPython
    std::string_view l = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    size_t b = l.find_first_not_of(" \t\f");
    if (b != std::string_view::npos && l[b] == '#') {
      size_t c = l.find("coding", b);
      if (c != std::string_view::npos && c + 6 < l.size() && (l[c + 6] == ':' || l[c + 6] == '=')) {
        size_t v = c + 7;
        while (v < l.size() && (l[v] == ' ' || l[v] == '\t')) ++v;
        size_t e = v;
        while (e < l.size() &&
               (std::isalnum(static_cast<unsigned char>(l[e])) || l[e] == '-' || l[e] == '_' || l[e] == '.'))
          ++e;
        std::string name(l.substr(v, e - v));
        for (char& ch : name) ch = ch == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        return name;
      }
    } else if (b != std::string_view::npos) {
      return {};  // code before a coding line: PEP 263 lines must come first
    }
    if (end == std::string_view::npos) break;
    start = end + (text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n' ? 2 : 1);
  }
  return {};
}

namespace {

// Exact Latin-1 names of Python's codec registry (cp1252 differs in 0x80–0x9F, so it is not one).
bool IsLatin1Name(const std::string& n) {
  return n == "latin-1" || n == "latin1" || n == "iso-8859-1" || n == "iso8859-1" || n == "l1" || n == "cp819" ||
         n == "iso-latin-1" || n == "latin" || n == "8859" || n == "iso-ir-100" || n == "csisolatin1";
}

bool IsCp1252Name(const std::string& n) { return n == "cp1252" || n == "windows-1252" || n == "1252"; }

// cp1252's characters for the bytes 0x80–0x9F (0: undefined, as in Python's codec, which refuses them).
constexpr char32_t kCp1252High[32] = {0x20AC, 0,      0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
                                      0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0,      0x017D, 0,
                                      0,      0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
                                      0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0,      0x017E, 0x0178};

void AppendUtf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

/// `in` decoded from Latin-1 or cp1252 to UTF-8; false at a byte cp1252 leaves undefined.
bool SingleByteToUtf8(std::string_view in, bool cp1252, std::string& out, size_t* bad) {
  out.clear();
  out.reserve(in.size() + in.size() / 8);
  for (size_t i = 0; i < in.size(); ++i) {
    auto c = static_cast<unsigned char>(in[i]);
    char32_t cp = c;
    if (cp1252 && c >= 0x80 && c < 0xA0) {
      cp = kCp1252High[c - 0x80];
      if (cp == 0) {
        *bad = i;
        return false;
      }
    }
    AppendUtf8(cp, out);
  }
  return true;
}

}  // namespace

// "58.0": one decimal, rounded down, so a file just over the limit never reads as equal to it.
static std::string MiB(uint64_t bytes) {
  uint64_t tenths = bytes * 10 / (uint64_t{1} << 20);
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10);
}

std::string_view SingleByteCodec(const std::string& declared) {
  if (IsLatin1Name(declared)) return "latin-1";
  if (IsCp1252Name(declared)) return "cp1252";
  return {};
}

std::string DecodeDeclaredLatin1(std::string text) {
  if (FirstInvalidUtf8(text).first == 0) return text;
  std::string_view codec = SingleByteCodec(DeclaredEncoding(text));
  std::string out;
  size_t bad = 0;
  if (!codec.empty() && SingleByteToUtf8(text, codec == "cp1252", out, &bad)) return out;
  return text;
}

Expected<std::string> EncodeSource(std::string_view utf8, std::string_view codec) {
  const bool cp1252 = codec == "cp1252";
  if (!cp1252 && codec != "latin-1") return InvalidArgument("cannot write text as " + std::string(codec));
  std::string out;
  out.reserve(utf8.size());
  uint32_t line = 1;
  for (size_t i = 0; i < utf8.size();) {
    auto c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80) {
      line += c == '\n';
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || i + len > utf8.size()) return InvalidArgument("line " + std::to_string(line) + ": not UTF-8");
    char32_t cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(utf8[i + k]) & 0x3F);
    i += len;
    int byte = -1;
    if (cp >= 0xA0 && cp <= 0xFF) byte = static_cast<int>(cp);
    else if (!cp1252 && cp >= 0x80 && cp < 0xA0) byte = static_cast<int>(cp);
    else if (cp1252)
      for (int b = 0; b < 32; ++b)
        if (kCp1252High[b] == cp && cp != 0) byte = 0x80 + b;
    if (byte < 0)
      return InvalidArgument("line " + std::to_string(line) + ": U+" +
                             [cp] {
                               char hex[16];
                               std::snprintf(hex, sizeof hex, "%04X", static_cast<unsigned>(cp));
                               return std::string(hex);
                             }() +
                             " cannot be written in " + std::string(codec));
    out.push_back(static_cast<char>(byte));
  }
  return out;
}

Expected<std::string> LoadPythonSource(const SourceFile& f, size_t max_bytes, bool decode_latin1,
                                       std::string* codec_out) {
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
  if (codec_out) codec_out->clear();
  auto [line, col] = FirstInvalidUtf8(*text);
  const std::string declared = line != 0 ? DeclaredEncoding(*text) : std::string();
  std::string_view codec = SingleByteCodec(declared);
  if (line != 0 && decode_latin1 && !codec.empty()) {
    std::string decoded;
    size_t bad = 0;
    if (!SingleByteToUtf8(*text, codec == "cp1252", decoded, &bad))
      return InvalidArgument(f.display + ": skipped: byte " + std::to_string(bad) + " is not a " + std::string(codec) +
                             " character (its coding line declares " + declared + ")");
    *text = std::move(decoded);
    if (codec_out) *codec_out = std::string(codec);
    line = 0;
  }
  if (line != 0 && !declared.empty() && declared != "utf-8" && declared != "utf8")
    return InvalidArgument(f.display + ":" + std::to_string(line) + ":" + std::to_string(col) +
                           ": skipped: its coding line declares " + declared +
                           ", which portkit does not read (UTF-8, Latin-1 and cp1252 only)");
  if (line != 0)
    return InvalidArgument(f.display + ":" + std::to_string(line) + ":" + std::to_string(col) +
                           ": skipped: not valid UTF-8 (convert the file to UTF-8)");
  // A BOM is kept: the parser leaves it out, and every copy writes the file's own bytes.
  return std::move(*text);
}

}  // namespace portkit::analyse
