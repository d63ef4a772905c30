#include "analyse/source_files.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "core/atomic_file.h"

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
      : root_(root), prefix_(std::move(prefix)), out_(out) {
    std::error_code ec;
    for (const auto& e : exclude) excluded_.insert(fs::weakly_canonical(e, ec).string());
    root_is_package_ = fs::exists(root / "__init__.py", ec);
  }

  void Walk(const fs::path& dir, const std::string& rel) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
      Problem(rel, "unreadable", std::string("cannot open folder: ") + std::strerror(errno));
      return;
    }
    auto id = std::make_pair(st.st_dev, st.st_ino);
    if (!visited_.insert(id).second) {
      Problem(rel, "symlink_loop", "folder already visited (symlink loop); skipped");
      return;
    }
    std::error_code ec;
    std::vector<fs::directory_entry> entries;
    fs::directory_iterator it(dir, ec);
    if (ec) {
      Problem(rel.empty() ? "." : rel, "unreadable", "cannot list folder: " + ec.message());
      return;
    }
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      if (ec) break;
      entries.push_back(*it);
    }
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.path().filename() < b.path().filename(); });
    for (const auto& e : entries) {
      std::string name = e.path().filename().string();
      std::string child_rel = rel.empty() ? name : rel + "/" + name;
      std::error_code sec;
      bool is_link = e.is_symlink(sec);
      fs::file_status status = fs::status(e.path(), sec);
      if (sec || !fs::exists(status)) {
        // Only links that look like sources matter; dangling links to libraries are noise.
        if (is_link && (e.path().extension() == ".py" || IsCppSource(e.path())))
          Problem(child_rel, "broken_symlink", "symlink target does not exist (or loops); skipped");
        continue;
      }
      if (fs::is_directory(status)) {
        if (name.empty() || name[0] == '.' || name == "__pycache__" || name == "node_modules") continue;
        if (excluded_.count(fs::weakly_canonical(e.path(), sec).string())) continue;
        Walk(e.path(), child_rel);
      } else if (fs::is_regular_file(status)) {
        if (e.path().extension() == ".py") AddPython(e.path(), child_rel);
        else if (IsCppSource(e.path())) out_.cpp.push_back({e.path(), Display(child_rel), child_rel, "", {}, false});
        else out_.others.push_back({e.path(), Display(child_rel), child_rel, "", {}, false});
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
  std::set<std::string> excluded_;
  std::set<std::pair<dev_t, ino_t>> visited_;
  bool root_is_package_ = false;
};

}  // namespace

SourceSet DiscoverSources(const fs::path& root, const std::string& display_prefix,
                          const std::vector<fs::path>& exclude, size_t /*max_bytes*/) {
  SourceSet out;
  Walker(root, display_prefix, exclude, out).Walk(root, "");
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

Expected<std::string> LoadPythonSource(const SourceFile& f, size_t max_bytes) {
  std::error_code ec;
  auto size = fs::file_size(f.path, ec);
  if (ec) return IoError(f.display + ": cannot read: " + ec.message());
  if (size > max_bytes)
    return InvalidArgument(f.display + ": skipped: " + std::to_string(size >> 20) +
                           " MiB is over the limit of " + std::to_string(max_bytes >> 20) +
                           " MiB (--max-file-mb)");
  auto text = ReadFile(f.path);
  if (!text.ok()) return IoError(f.display + ": cannot read: " + text.status().message());
  if (std::memchr(text->data(), '\0', text->size()))
    return InvalidArgument(f.display + ": skipped: binary file (contains NUL bytes)");
  auto [line, col] = FirstInvalidUtf8(*text);
  if (line != 0)
    return InvalidArgument(f.display + ":" + std::to_string(line) + ":" + std::to_string(col) +
                           ": skipped: not valid UTF-8 (convert the file to UTF-8)");
  if (text->size() >= 3 && text->compare(0, 3, "\xEF\xBB\xBF") == 0) text->replace(0, 3, "   ");
  return std::move(*text);
}

}  // namespace portkit::analyse
