#include "accuracy/op_spill.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace portkit::accuracy {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;

template <typename T>
void Put(std::string& buf, T v) {
  buf.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void PutString(std::string& buf, const std::string& s) {
  Put<uint32_t>(buf, static_cast<uint32_t>(s.size()));
  buf += s;
}
template <typename T>
bool Get(const char*& p, const char* end, T& v) {
  if (static_cast<size_t>(end - p) < sizeof v) return false;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return true;
}
bool GetString(const char*& p, const char* end, std::string& s) {
  uint32_t n = 0;
  if (!Get(p, end, n) || static_cast<size_t>(end - p) < n) return false;
  s.assign(p, n);
  p += n;
  return true;
}

void PutOp(std::string& buf, const DumpOp& op) {
  Put<int64_t>(buf, op.index);
  for (const std::string* s : {&op.name, &op.phase, &op.stack, &op.call}) PutString(buf, *s);
  Put<uint32_t>(buf, static_cast<uint32_t>(op.tensors.size()));
  for (const DumpTensor& t : op.tensors) {
    PutString(buf, t.key), PutString(buf, t.dtype), PutString(buf, t.data_name);
    Put<uint32_t>(buf, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) Put<int64_t>(buf, d);
    for (double v : {t.max, t.min, t.mean, t.norm}) Put<double>(buf, v);
    Put<int64_t>(buf, t.crc32), Put<int64_t>(buf, t.nan), Put<int64_t>(buf, t.inf);
    Put<int8_t>(buf, t.requires_grad);
    Put<uint8_t>(buf, static_cast<uint8_t>(t.has_stats | t.integral_stats << 1));
  }
  Put<uint32_t>(buf, static_cast<uint32_t>(op.scalars.size()));
  for (const DumpScalar& s : op.scalars) {
    PutString(buf, s.key), PutString(buf, s.type), PutString(buf, s.value);
    Put<uint64_t>(buf, s.before);
  }
}

bool GetOp(const char*& p, const char* end, DumpOp& op) {
  op = DumpOp();
  uint32_t n = 0;
  if (!Get(p, end, op.index)) return false;
  for (std::string* s : {&op.name, &op.phase, &op.stack, &op.call})
    if (!GetString(p, end, *s)) return false;
  if (!Get(p, end, n)) return false;
  op.tensors.resize(std::min<size_t>(n, static_cast<size_t>(end - p)));
  if (op.tensors.size() != n) return false;
  for (DumpTensor& t : op.tensors) {
    uint32_t dims = 0;
    uint8_t flags = 0;
    if (!GetString(p, end, t.key) || !GetString(p, end, t.dtype) || !GetString(p, end, t.data_name) ||
        !Get(p, end, dims) || static_cast<size_t>(end - p) / sizeof(int64_t) < dims)
      return false;
    t.shape.resize(dims);
    for (int64_t& d : t.shape) Get(p, end, d);
    if (!Get(p, end, t.max) || !Get(p, end, t.min) || !Get(p, end, t.mean) || !Get(p, end, t.norm) ||
        !Get(p, end, t.crc32) || !Get(p, end, t.nan) || !Get(p, end, t.inf) || !Get(p, end, t.requires_grad) ||
        !Get(p, end, flags))
      return false;
    t.has_stats = flags & 1, t.integral_stats = flags & 2;
  }
  if (!Get(p, end, n)) return false;
  op.scalars.resize(std::min<size_t>(n, static_cast<size_t>(end - p)));
  if (op.scalars.size() != n) return false;
  for (DumpScalar& s : op.scalars) {
    uint64_t before = 0;
    if (!GetString(p, end, s.key) || !GetString(p, end, s.type) || !GetString(p, end, s.value) || !Get(p, end, before))
      return false;
    s.before = static_cast<size_t>(before);
  }
  return true;
}

}  // namespace

Expected<int> OpenUnnamedTempFile(const std::filesystem::path& dir, const std::string& stem, const std::string& what) {
  int fd = -1;
#ifdef O_TMPFILE
  fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
  if (fd < 0) {
    std::string name = (dir / (stem + ".XXXXXX")).string();
    fd = ::mkstemp(name.data());
    if (fd >= 0) ::unlink(name.c_str());
  }
  if (fd < 0)
    return IoError(dir.string() + ": cannot create a temporary file for " + what + " (" + std::strerror(errno) +
                   "); make the folder writable, or choose another -o");
  return fd;
}

Expected<std::shared_ptr<OpSpill>> OpSpill::Create(const std::filesystem::path& dir) {
  if (dir.empty()) return std::shared_ptr<OpSpill>(new OpSpill(-1, dir));
  auto fd = OpenUnnamedTempFile(dir, ".portkit-compare-ops", "compare's operators");
  if (!fd) return fd.status();
  return std::shared_ptr<OpSpill>(new OpSpill(*fd, dir));
}

OpSpill::~OpSpill() {
  if (fd_ >= 0) ::close(fd_);
}

Status OpSpill::Append(const DumpOp& op) {
  if (fd_ < 0) {
    DumpOp& kept = ops_.emplace_back(op);
    kept.kind.clear(), kept.module.clear(), kept.file.clear(), kept.forward.clear();
    for (DumpTensor& t : kept.tensors) t.note.clear();
    return Status::Ok();
  }
  const size_t at = buf_.size();
  Put<uint32_t>(buf_, 0);
  PutOp(buf_, op);
  const auto length = static_cast<uint32_t>(buf_.size() - at - sizeof(uint32_t));
  std::memcpy(buf_.data() + at, &length, sizeof length);
  return buf_.size() >= kBufferBytes ? Flush() : Status::Ok();
}

Status OpSpill::Flush() {
  for (size_t done = 0; done < buf_.size();) {
    ssize_t n = ::pwrite(fd_, buf_.data() + done, buf_.size() - done, static_cast<off_t>(size_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return IoError(dir_.string() + ": cannot write compare's operators to a temporary file there (" +
                     std::strerror(errno) + "); free some space, or choose another -o");
    done += static_cast<size_t>(n);
  }
  size_ += buf_.size();
  buf_.clear();
  return Status::Ok();
}

Status OpSpill::ReadError(const std::string& why) const {
  return IoError(dir_.string() + ": cannot read compare's operators back from their temporary file (" + why + ")");
}

Expected<bool> OpSpill::Reader::Next(DumpOp& op) {
  if (spill_.fd_ < 0) {
    if (in_memory_ >= spill_.ops_.size()) return false;
    op = spill_.ops_[in_memory_++];
    return true;
  }
  for (;;) {
    uint32_t length = 0;
    const size_t have = buf_.size() - pos_;
    if (have >= sizeof length) std::memcpy(&length, buf_.data() + pos_, sizeof length);
    if (have >= sizeof length && have - sizeof length >= length) break;
    if (read_ == spill_.size_) {
      if (have == 0) return false;
      return spill_.ReadError("cut short");
    }
    buf_.erase(0, pos_), pos_ = 0;
    const size_t want = std::max<size_t>(kBufferBytes, sizeof length + length);
    const size_t old = buf_.size();
    const auto n_want = static_cast<size_t>(std::min<uint64_t>(want, spill_.size_ - read_));
    buf_.resize(old + n_want);
    for (size_t got = 0; got < n_want;) {
      ssize_t n = ::pread(spill_.fd_, buf_.data() + old + got, n_want - got, static_cast<off_t>(read_ + got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return spill_.ReadError(n < 0 ? std::strerror(errno) : "cut short");
      got += static_cast<size_t>(n);
    }
    read_ += n_want;
  }
  uint32_t length = 0;
  std::memcpy(&length, buf_.data() + pos_, sizeof length);
  const char* p = buf_.data() + pos_ + sizeof length;
  const char* end = p + length;
  if (!GetOp(p, end, op) || p != end) return spill_.ReadError("damaged");
  pos_ += sizeof length + length;
  return true;
}

}  // namespace portkit::accuracy
