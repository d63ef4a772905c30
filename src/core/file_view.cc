#include "core/file_view.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/input_files.h"

namespace portkit {

FileView::~FileView() {
  if (addr_ && size_) ::munmap(addr_, size_);
}

FileView::FileView(FileView&& other) noexcept : addr_(other.addr_), size_(other.size_) {
  other.addr_ = nullptr;
  other.size_ = 0;
}

FileView& FileView::operator=(FileView&& other) noexcept {
  if (this != &other) {
    if (addr_ && size_) ::munmap(addr_, size_);
    addr_ = other.addr_;
    size_ = other.size_;
    other.addr_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void FileView::ReleaseRange(const void* data, size_t bytes) const {
  auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto first = reinterpret_cast<uintptr_t>(data), base = reinterpret_cast<uintptr_t>(addr_);
  if (!addr_ || first < base || first + bytes > base + size_) return;  // not inside this view
  auto begin = (first + page - 1) / page * page;
  auto end = (first + bytes) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

Expected<FileView> FileView::Open(const std::filesystem::path& path) {
  // A tensor file in a dump is never a link, a FIFO or a device (docs/safety.md).
  auto file = OpenInputFile(path, Links::kRefuse);
  if (!file.ok()) return file.status();
  int fd = file->release();
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return IoError(path.string() + ": cannot stat: " + std::strerror(err));
  }
  FileView view;
  view.size_ = static_cast<size_t>(st.st_size);
  if (view.size_ > 0) {
    void* addr = ::mmap(nullptr, view.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      view.size_ = 0;
      return IoError(path.string() + ": cannot map: " + std::strerror(err));
    }
    view.addr_ = addr;
  }
  ::close(fd);
  return view;
}

}  // namespace portkit
