#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/input_files.h"

namespace portkit {

Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content) {
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return IoError(path.string() + ": cannot write: " + std::strerror(errno));
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return IoError(path.string() + ": write failed: " + std::strerror(err));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return IoError(path.string() + ": write failed: " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return IoError(path.string() + ": cannot rename into place: " + std::strerror(err));
  }
  return Status::Ok();
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
