#include "core/input_files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
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
      out_.push_back(
          {dir, rel.empty() ? "." : rel, InputEntry::Kind::kUnreadable, "cannot list folder: " + ec.message()});
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
          out_.push_back(
              {e.path(), child_rel, InputEntry::Kind::kOutput,
               "output folder of an earlier portkit" + (by.empty() ? std::string() : " " + by) + " run; not entered"});
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

std::string MarkedOutputCommand(const fs::path& folder) { return ReadOutputMarker(folder).command; }

namespace {

constexpr std::string_view kInProgress = "\tin progress: pid ";

// The name of process `pid` (/proc/PID/comm), "" when it cannot be read.
std::string ProcessName(const std::string& pid) {
  auto text = ReadFile("/proc/" + pid + "/comm");
  if (!text.ok()) return {};
  std::string name = *text;
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
  return name;
}

}  // namespace

OutputMarker ReadOutputMarker(const fs::path& folder) {
  OutputMarker marker;
  auto lines = MarkerLines(folder);
  if (lines.empty()) return marker;
  std::string first = lines.front();
  if (size_t at = first.find(kInProgress); at != std::string::npos) {
    marker.finished = false;
    marker.pid = std::strtol(first.c_str() + at + kInProgress.size(), nullptr, 10);
    first.resize(at);
    if (marker.pid > 0 && marker.pid != static_cast<long>(::getpid()) &&
        (::kill(static_cast<pid_t>(marker.pid), 0) == 0 || errno == EPERM)) {
      std::string name = ProcessName(std::to_string(marker.pid));
      marker.running = !name.empty() && name == ProcessName("self");
    }
  }
  const std::string prefix = "portkit ";
  marker.command = first.rfind(prefix, 0) == 0 ? first.substr(prefix.size()) : first;
  for (size_t i = 1; i < lines.size(); ++i)
    if (IsContainedRelativePath(lines[i]) && lines[i] != kOutputMarker) marker.files.push_back(lines[i]);
  return marker;
}

Status MarkOutputStarted(const fs::path& folder, std::string_view command, const std::vector<std::string>& files) {
  std::string text = "portkit " + std::string(command) + std::string(kInProgress) + std::to_string(::getpid()) + "\n";
  for (const auto& f : files)
    if (f.find('\n') == std::string::npos) text += f + "\n";
  return WriteFileAtomic(folder / kOutputMarker, text);
}

Status MarkOutput(const fs::path& folder, std::string_view command, const std::vector<std::string>& files) {
  std::string text = "portkit " + std::string(command) + "\n";
  for (const auto& f : files)
    if (f.find('\n') == std::string::npos) text += f + "\n";
  return WriteFileAtomic(folder / kOutputMarker, text);
}

std::vector<std::string> MarkedOutputFiles(const fs::path& folder) { return ReadOutputMarker(folder).files; }

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
    if (valid && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
                  (cp >= 0xD800 && cp <= 0xDFFF)))
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

// ---- room for a copy ------------------------------------------------------------------------

namespace {

std::string Megabytes(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

}  // namespace

CopySize MeasureCopy(const std::vector<fs::path>& files) {
  CopySize size;
  for (const auto& f : files) {
    struct stat st {};
    if (::lstat(f.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    uint64_t length = static_cast<uint64_t>(st.st_size);
    size.bytes += length;
    uint64_t on_disk = static_cast<uint64_t>(st.st_blocks) * 512u;
    // Sparse: at least 1 MiB of holes and under half of it allocated.
    if (length >= (1u << 20) && on_disk + (1u << 20) <= length && on_disk < length / 2)
      size.sparse.push_back(f.string() + ": a sparse file: " + Megabytes(length) + " long, " + Megabytes(on_disk) +
                            " on disk; the copy writes its full length");
  }
  return size;
}

Expected<uint64_t> FreeBytes(const fs::path& dir) {
  if (const char* fake = std::getenv("PORTKIT_TEST_FREE_BYTES"); fake && *fake) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(fake, &end, 10);
    if (end && *end == '\0') return static_cast<uint64_t>(v);
  }
  fs::path probe = dir;
  std::error_code ec;
  while (!probe.empty() && !fs::exists(probe, ec) && probe != probe.parent_path()) probe = probe.parent_path();
  if (probe.empty()) probe = ".";
  struct statvfs sv {};
  if (::statvfs(probe.c_str(), &sv) != 0) {
    int err = errno;
    return IoError(probe.string() + ": cannot measure the free space: " + std::strerror(err));
  }
  return static_cast<uint64_t>(sv.f_bavail) * static_cast<uint64_t>(sv.f_frsize);
}

Status CheckFreeSpace(const fs::path& dir, uint64_t bytes, std::string_view what) {
  auto free_bytes = FreeBytes(dir);
  if (!free_bytes.ok()) return free_bytes.status();
  const uint64_t slack = 1u << 20;
  if (bytes + slack <= *free_bytes) return Status::Ok();
  return IoError("not enough free space: " + std::string(what) + " writes " + Megabytes(bytes) + " (" +
                 std::to_string(bytes) + " bytes) into " + dir.string() + ", which has " + Megabytes(*free_bytes) +
                 " (" + std::to_string(*free_bytes) +
                 " bytes) free; nothing was copied. Free some space or give another output folder");
}

// ---- code run in this process ----------------------------------------------------------------

namespace {

// "" when `st` (of `path`) passes the rule for code this process loads, else why not.
std::string WhyNotPrivate(const struct stat& st, bool folder) {
  uid_t me = ::geteuid();
  if (st.st_uid != me && st.st_uid != 0)
    return "is owned by uid " + std::to_string(st.st_uid) + ", not by you (uid " + std::to_string(me) + ") or root";
  bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (others_write && !(folder && (st.st_mode & S_ISVTX))) {
    char mode[16];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return std::string("is writable by ") + ((st.st_mode & S_IWOTH) ? "everyone" : "its group") + " (mode " + mode +
           ")";
  }
  return "";
}

}  // namespace

Status CheckPrivateFolder(const fs::path& dir, std::string_view what) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    int err = errno;
    return IoError(std::string(what) + " " + dir.string() + ": " + std::strerror(err));
  }
  if (S_ISLNK(st.st_mode))
    return InvalidArgument(std::string(what) + " " + dir.string() +
                           " is a symbolic link; its code is not loaded. Give the folder it points to");
  if (!S_ISDIR(st.st_mode))
    return InvalidArgument(std::string(what) + " " + dir.string() + " is " + KindOfMode(st.st_mode) + ", not a folder");
  std::string why = WhyNotPrivate(st, true);
  if (why.empty()) return Status::Ok();
  return InvalidArgument(
      std::string(what) + " " + dir.string() + " " + why +
      ": the shared objects in it could be replaced by someone else and would run inside portkit, so none "
      "is loaded. Make it yours and private (chmod go-w) or use a private folder");
}

Expected<UniqueFd> OpenPrivateCode(const fs::path& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP) return InvalidArgument(file.string() + ": is a symbolic link; not loaded");
    return IoError(file.string() + ": cannot open: " + std::strerror(err));
  }
  UniqueFd owned(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    return IoError(file.string() + ": " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode))
    return InvalidArgument(file.string() + ": not a regular file (" + KindOfMode(st.st_mode) + "); not loaded");
  std::string why = WhyNotPrivate(st, false);
  if (!why.empty())
    return InvalidArgument(file.string() + " " + why + ": someone else could have written its code; not loaded");
  return owned;
}

std::string ProcFdPath(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

}  // namespace portkit
