#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/input_files.h"

namespace portkit {

namespace {

/// Writes all of `content` to `fd`; errno on failure.
bool WriteAll(int fd, std::string_view content) {
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

/// Opens `tmp` (the temporary of `path`) for writing, hands `produce` a sink that appends to it,
/// then syncs and closes it; on failure nothing is left. `size` gets the bytes written.
Status WriteTemporaryStreamed(const std::filesystem::path& path, const std::filesystem::path& tmp,
                              const std::function<Status(const ReportSet::Sink&)>& produce, uint64_t& size) {
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return IoError(path.string() + ": cannot write: " + std::strerror(errno));
  size = 0;
  ReportSet::Sink sink = [&](std::string_view piece) -> Status {
    if (!WriteAll(fd, piece)) return IoError(path.string() + ": write failed: " + std::strerror(errno));
    size += piece.size();
    return Status::Ok();
  };
  Status st = produce(sink);
  if (!st.ok()) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return st;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return IoError(path.string() + ": write failed: " + std::strerror(err));
  }
  return Status::Ok();
}

/// Writes and syncs `content` to `tmp` (the temporary of `path`); on failure nothing is left.
Status WriteTemporary(const std::filesystem::path& path, const std::filesystem::path& tmp, std::string_view content) {
  uint64_t size = 0;
  return WriteTemporaryStreamed(
      path, tmp, [&](const ReportSet::Sink& sink) { return sink(content); }, size);
}

std::filesystem::path TemporaryOf(const std::filesystem::path& path) {
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  return tmp;
}

}  // namespace

Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content) {
  const std::filesystem::path tmp = TemporaryOf(path);
  PORTKIT_RETURN_IF_ERROR(WriteTemporary(path, tmp, content));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return IoError(path.string() + ": cannot rename into place: " + std::strerror(err));
  }
  return Status::Ok();
}

Status WriteFileAtomicStreamed(const std::filesystem::path& path,
                               const std::function<Status(const ReportSet::Sink&)>& produce) {
  const std::filesystem::path tmp = TemporaryOf(path);
  uint64_t size = 0;
  PORTKIT_RETURN_IF_ERROR(WriteTemporaryStreamed(path, tmp, produce, size));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return IoError(path.string() + ": cannot rename into place: " + std::strerror(err));
  }
  return Status::Ok();
}

std::vector<std::string> RemoveStaleTemporaries(const std::filesystem::path& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || at == 0) continue;
    const char* digits = name.c_str() + at + 5;
    char* end = nullptr;
    long pid = std::strtol(digits, &end, 10);
    if (end == digits || *end != '\0' || pid <= 0) continue;
    if (!e.is_regular_file(ec) || e.is_symlink(ec)) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) continue;  // still running
    if (std::filesystem::remove(e.path(), ec)) removed.push_back(name);
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

std::vector<std::string> RemoveStaleTemporariesBelow(const std::filesystem::path& root) {
  std::vector<std::string> removed;
  std::error_code ec;
  std::vector<std::filesystem::path> folders{root};
  for (std::filesystem::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && !it->is_symlink(ec)) folders.push_back(it->path());
  for (const auto& dir : folders) {
    std::string rel = dir == root ? "" : dir.lexically_relative(root).generic_string() + "/";
    for (auto& name : RemoveStaleTemporaries(dir)) removed.push_back(rel + name);
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

ReportSet::ReportSet(std::filesystem::path dir, std::string marker) : dir_(std::move(dir)), marker_(std::move(marker)) {
  RemoveStaleTemporaries(dir_);
}

ReportSet::~ReportSet() {
  for (const auto& tmp : staged_) ::unlink(tmp.c_str());
}

Status ReportSet::Add(const std::string& name, std::string_view content) {
  const std::filesystem::path path = dir_ / name;
  const std::filesystem::path tmp = TemporaryOf(path);
  staged_.push_back(tmp);
  PORTKIT_RETURN_IF_ERROR(WriteTemporary(path, tmp, content));
  files_.emplace_back(name, content.size());
  return Status::Ok();
}

Status ReportSet::AddStreamed(const std::string& name, const std::function<Status(const Sink&)>& produce) {
  const std::filesystem::path path = dir_ / name;
  const std::filesystem::path tmp = TemporaryOf(path);
  staged_.push_back(tmp);
  uint64_t size = 0;
  PORTKIT_RETURN_IF_ERROR(WriteTemporaryStreamed(path, tmp, produce, size));
  files_.emplace_back(name, size);
  return Status::Ok();
}

Status ReportSet::Publish() {
  const std::filesystem::path marker = dir_ / marker_;
  if (::unlink(marker.c_str()) != 0 && errno != ENOENT)
    return IoError(marker.string() + ": cannot remove the old completion marker: " + std::strerror(errno));
  std::string listing;
  for (size_t i = 0; i < files_.size(); ++i) {
    const std::filesystem::path path = dir_ / files_[i].first;
    if (::rename(staged_[i].c_str(), path.c_str()) != 0)
      return IoError(path.string() + ": cannot rename into place: " + std::strerror(errno));
    listing += files_[i].first + " " + std::to_string(files_[i].second) + "\n";
  }
  staged_.clear();
  return WriteFileAtomic(marker, listing);
}

Status CopyFileAtomic(const std::filesystem::path& from, const std::filesystem::path& to) {
  // The source is never a link (docs/safety.md, Links) nor a FIFO or device.
  auto in = OpenInputFile(from, Links::kRefuse);
  if (!in.ok()) return in.status();
  struct stat st {};
  if (::fstat(in->get(), &st) != 0) {
    int err = errno;
    return IoError(from.string() + ": cannot copy to " + to.string() + ": " + std::strerror(err));
  }
  std::filesystem::path tmp = to;
  tmp += ".tmp." + std::to_string(::getpid());
  int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, st.st_mode & 07777);
  if (out < 0) {
    int err = errno;
    return IoError(from.string() + ": cannot copy to " + to.string() + ": " + std::strerror(err));
  }
  // Every failure below keeps its errno: the message is built before anything else can change it.
  auto fail = [&](const char* what, int err) {
    ::close(out);
    ::unlink(tmp.c_str());
    return IoError(from.string() + ": cannot copy to " + to.string() + ": " + what + std::strerror(err));
  };
  std::string buf(1 << 16, '\0');
  while (true) {
    ssize_t n = ::read(in->get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("read failed: ", errno);
    }
    if (n == 0) break;
    const char* p = buf.data();
    size_t left = static_cast<size_t>(n);
    while (left > 0) {
      ssize_t w = ::write(out, p, left);
      if (w < 0) {
        if (errno == EINTR) continue;
        return fail("write failed: ", errno);
      }
      p += w;
      left -= static_cast<size_t>(w);
    }
  }
  if (::fchmod(out, st.st_mode & 07777) != 0) return fail("cannot set the mode: ", errno);
  if (::close(out) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return IoError(from.string() + ": cannot copy to " + to.string() + ": write failed: " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), to.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return IoError(to.string() + ": cannot rename into place: " + std::strerror(err));
  }
  return Status::Ok();
}

Expected<std::string> ReadFile(const std::filesystem::path& path) {
  auto in = OpenInputFile(path);
  if (!in.ok()) return in.status();
  std::string out;
  struct stat st {};
  if (::fstat(in->get(), &st) == 0 && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(in->get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(path.string() + ": read failed: " + std::strerror(errno));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace portkit
