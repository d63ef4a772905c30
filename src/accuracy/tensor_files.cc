#include "accuracy/tensor_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace portkit::accuracy {

std::string SafeName(std::string s) {
  for (char& c : s)
    if (c == '.' || c == '/' || c == '\\' || c == ' ' || c == ':') c = '_';
  return s;
}

const char* NpyDescr(DType t, bool* widened) {
  *widened = false;
  switch (t) {
    case DType::kF64: return "<f8";
    case DType::kF32: return "<f4";
    case DType::kF16: return "<f2";
    case DType::kI64: return "<i8";
    case DType::kI32: return "<i4";
    case DType::kI16: return "<i2";
    case DType::kI8: return "|i1";
    case DType::kU64: return "<u8";
    case DType::kU32: return "<u4";
    case DType::kU16: return "<u2";
    case DType::kU8: return "|u1";
    case DType::kBool: return "|b1";
    default: *widened = true; return "<f4";
  }
}

std::string NpyHeader(DType t, const std::vector<int64_t>& shape) {
  bool widened = false;
  const char* descr = NpyDescr(t, &widened);
  std::string dims = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += std::to_string(shape[i]);
    dims += shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "";
  }
  dims += ")";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + dims + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY\x01";
  out.push_back('\0');
  uint16_t len = static_cast<uint16_t>(header.size());
  out.push_back(static_cast<char>(len & 0xFF));
  out.push_back(static_cast<char>(len >> 8));
  out += header;
  return out;
}

void AppendNpyData(DType t, const uint8_t* data, size_t count, std::string* out) {
  bool widened = false;
  NpyDescr(t, &widened);
  if (!widened) {
    out->append(reinterpret_cast<const char*>(data), count * DTypeSize(t));
    return;
  }
  std::vector<double> v(count);
  DecodeToDouble(t, data, count, v.data());
  for (double x : v) {
    float f = static_cast<float>(x);
    out->append(reinterpret_cast<const char*>(&f), 4);
  }
}

void AppendTxtData(DType t, const uint8_t* data, size_t count, std::string* out) {
  std::vector<double> v(count);
  DecodeToDouble(t, data, count, v.data());
  char buf[40];
  for (double x : v) {
    int n = std::snprintf(buf, sizeof buf, "%.18e\n", x);  // numpy.savetxt's default format
    out->append(buf, static_cast<size_t>(n));
  }
}

Expected<StreamingFile> StreamingFile::Create(const std::filesystem::path& path) {
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(path.string() + ": cannot write: " + std::strerror(errno));
  return StreamingFile(path, tmp, fd);
}

StreamingFile::StreamingFile(StreamingFile&& o) noexcept
    : path_(std::move(o.path_)), tmp_(std::move(o.tmp_)), fd_(o.fd_) {
  o.fd_ = -1;
}

StreamingFile::~StreamingFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

Status StreamingFile::Append(std::string_view bytes) {
  if (fd_ < 0) return IoError(path_.string() + ": write after close");
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(path_.string() + ": write failed: " + std::strerror(errno));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status StreamingFile::Commit() {
  if (fd_ < 0) return IoError(path_.string() + ": already closed");
  int fd = fd_;
  fd_ = -1;
  int err = ::fsync(fd) != 0 ? errno : 0;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp_.c_str());
    return IoError(path_.string() + ": write failed: " + std::strerror(err));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    return IoError(path_.string() + ": cannot rename into place: " + std::strerror(err));
  }
  return Status::Ok();
}

}  // namespace portkit::accuracy
