#include "core/input_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>

#include "core/atomic_file.h"

namespace portkit {
namespace fs = std::filesystem;
namespace {

const char* KindOfMode(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

}  // namespace

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

Expected<UniqueFd> OpenInputFile(const fs::path& path, Links links) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  if (links == Links::kRefuse) flags |= O_NOFOLLOW;
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    int err = errno;
    struct stat lst {};
    if (err == ELOOP && links == Links::kRefuse && ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode))
      return InvalidArgument(path.string() + ": is a symbolic link; not followed");
    return IoError(path.string() + ": cannot open: " + std::strerror(err));
  }
  UniqueFd file(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return IoError(path.string() + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return InvalidArgument(path.string() + ": not a regular file (" + KindOfMode(st.st_mode) + "); not read");
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return file;
}

std::string DescribeFileType(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "missing";
  return KindOfMode(st.st_mode);
}

Status RefuseSymlinkedPath(const fs::path& path, std::string_view what) {
  std::error_code ec;
  fs::path p = path;
  // "dir/" names the folder the link points to on POSIX; it is still the user naming a link.
  while (!p.empty() && !p.has_filename() && p != p.root_path()) p = p.parent_path();
  if (p.empty() || !fs::is_symlink(p, ec)) return Status::Ok();
  fs::path target = fs::read_symlink(p, ec);
  return InvalidArgument(std::string(what) + " " + path.string() + " is a symbolic link" +
                         (ec ? std::string() : " (to " + target.string() + ")") +
                         "; give the path it points to (links are never followed)");
}

// ---- walking ---------------------------------------------------------------------------------

namespace {

class TreeWalker {
 public:
  TreeWalker(const WalkOptions& options, std::vector<InputEntry>& out) : options_(options), out_(out) {
    std::error_code ec;
    for (const auto& e : options.exclude) excluded_.insert(fs::weakly_canonical(e, ec).string());
  }

  void Walk(const fs::path& dir, const std::string& rel, size_t depth) {
    std::error_code ec;
    std::vector<fs::directory_entry> entries;
    fs::directory_iterator it(dir, ec);
    if (ec) {
      out_.push_back({dir, rel.empty() ? "." : rel, InputEntry::Kind::kUnreadable, "cannot list folder: " + ec.message()});
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
      struct stat st {};
      if (::lstat(e.path().c_str(), &st) != 0) continue;  // gone since it was listed
      if (S_ISLNK(st.st_mode)) {
        std::error_code lec;
        fs::path target = fs::read_symlink(e.path(), lec);
        out_.push_back({e.path(), child_rel, InputEntry::Kind::kLink,
                        "symbolic link" + (lec ? std::string() : " to " + target.string()) + "; not followed"});
      } else if (S_ISDIR(st.st_mode)) {
        if (options_.skip_hidden_folders && !name.empty() && name[0] == '.') continue;
        if (std::find(options_.skip_folder_names.begin(), options_.skip_folder_names.end(), name) !=
            options_.skip_folder_names.end())
          continue;
        std::error_code cec;
        if (!excluded_.empty() && excluded_.count(fs::weakly_canonical(e.path(), cec).string())) continue;
        if (IsMarkedOutput(e.path())) {
          std::string by = MarkedOutputCommand(e.path());
          out_.push_back({e.path(), child_rel, InputEntry::Kind::kOutput,
                          "output folder of an earlier portkit" + (by.empty() ? std::string() : " " + by) +
                              " run; not entered"});
          continue;
        }
        if (depth + 1 > options_.max_depth) {
          out_.push_back({e.path(), child_rel, InputEntry::Kind::kUnreadable,
                          "folder nested deeper than " + std::to_string(options_.max_depth) + " levels; not entered"});
          continue;
        }
        Walk(e.path(), child_rel, depth + 1);
      } else if (S_ISREG(st.st_mode)) {
        out_.push_back({e.path(), child_rel, InputEntry::Kind::kFile, ""});
      } else {
        out_.push_back({e.path(), child_rel, InputEntry::Kind::kSpecial,
                        std::string("not a regular file (") + KindOfMode(st.st_mode) + "); not read"});
      }
    }
  }

 private:
  const WalkOptions& options_;
  std::vector<InputEntry>& out_;
  std::set<std::string> excluded_;
};

}  // namespace

std::vector<InputEntry> WalkInputTree(const fs::path& root, const WalkOptions& options) {
  std::vector<InputEntry> out;
  TreeWalker(options, out).Walk(root, "", 0);
  return out;
}

Status CopySymlinkAtomic(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::path target = fs::read_symlink(from, ec);
  if (ec) return IoError(from.string() + ": cannot read the symbolic link: " + ec.message());
  fs::path tmp = to;
  tmp += ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::symlink(target.c_str(), tmp.c_str()) != 0)
    return IoError(to.string() + ": cannot create the symbolic link: " + std::strerror(errno));
  if (::rename(tmp.c_str(), to.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return IoError(to.string() + ": cannot rename into place: " + std::strerror(err));
  }
  return Status::Ok();
}

// ---- outputs ---------------------------------------------------------------------------------

bool IsMarkedOutput(const fs::path& folder) {
  struct stat st {};
  return ::lstat((folder / kOutputMarker).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

namespace {
std::vector<std::string> MarkerLines(const fs::path& folder) {
  std::vector<std::string> lines;
  if (!IsMarkedOutput(folder)) return lines;
  auto text = ReadFile(folder / kOutputMarker);
  if (!text.ok()) return lines;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}
}  // namespace

std::string MarkedOutputCommand(const fs::path& folder) {
  auto lines = MarkerLines(folder);
  if (lines.empty()) return {};
  std::string first = lines.front();
  const std::string prefix = "portkit ";
  return first.rfind(prefix, 0) == 0 ? first.substr(prefix.size()) : first;
}

Status MarkOutput(const fs::path& folder, std::string_view command, const std::vector<std::string>& files) {
  std::string text = "portkit " + std::string(command) + "\n";
  for (const auto& f : files)
    if (f.find('\n') == std::string::npos) text += f + "\n";
  return WriteFileAtomic(folder / kOutputMarker, text);
}

std::vector<std::string> MarkedOutputFiles(const fs::path& folder) {
  auto lines = MarkerLines(folder);
  std::vector<std::string> files;
  for (size_t i = 1; i < lines.size(); ++i)
    if (IsContainedRelativePath(lines[i]) && lines[i] != kOutputMarker) files.push_back(lines[i]);
  return files;
}

bool IsContainedRelativePath(std::string_view rel) {
  if (rel.empty() || rel.front() == '/' || rel.find('\0') != std::string_view::npos) return false;
  size_t start = 0;
  while (start <= rel.size()) {
    size_t slash = rel.find('/', start);
    std::string_view part = rel.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part.empty() || part == "..") return false;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return true;
}

std::string SafeFileName(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    out.push_back(c == '/' || c == '\\' || u < 0x20 || u == 0x7f ? '_' : c);
  }
  if (out.empty()) out = "_";
  if (out.front() == '.') out.front() = '_';
  constexpr size_t kMax = 200;  // NAME_MAX is 255 bytes; room for a prefix and an extension
  if (out.size() > kMax) {
    size_t cut = kMax;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
    out.resize(cut);
  }
  return out;
}

// ---- generated code --------------------------------------------------------------------------

std::string PythonStringLiteral(std::string_view text) {
  // repr() picks single quotes unless the text has ' and no ": do the same.
  bool has_single = text.find('\'') != std::string_view::npos;
  bool has_double = text.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  static const char* kHex = "0123456789abcdef";
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size();
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    if (c < 0x80) {
      if (c == '\\') out += "\\\\";
      else if (c == static_cast<unsigned char>(quote)) out += std::string("\\") + quote;
      else if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (c < 0x20 || c == 0x7f) out += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
      else out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    // A valid UTF-8 sequence is kept; anything else becomes U+FFFD.
    size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool valid = len != 0 && i + len <= n;
    uint32_t cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (size_t k = 1; valid && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) valid = false;
      else cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (valid && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
                  cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)))
      valid = false;
    if (valid && (cp == 0x2028 || cp == 0x2029 || (cp >= 0x80 && cp < 0xA0))) {
      // Not printable for repr(): escape as \uXXXX / \xXX.
      char buf[12];
      std::snprintf(buf, sizeof buf, cp < 0x100 ? "\\x%02x" : "\\u%04x", cp);
      out += buf;
      i += len;
      continue;
    }
    if (valid) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out += "\\ufffd";
      ++i;
    }
  }
  out.push_back(quote);
  return out;
}

std::string ShellQuote(std::string_view text) {
  bool safe = !text.empty();
  for (char c : text)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || (c != '\0' && std::strchr("@%+=:,./-_", c)))) safe = false;
  if (safe) return std::string(text);
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += "'\\''";
    else out.push_back(c);
  }
  return out + "'";
}

}  // namespace portkit
