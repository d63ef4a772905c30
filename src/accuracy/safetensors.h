#pragma once
/// Read-only, memory-mapped safetensors files: `u64 LE header length`, a JSON header
/// `{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}`, then the data.
/// Every header field is checked against the file (offsets inside the data, sizes matching
/// shape × dtype) so a truncated file or a header that lies is an error naming the file and the
/// tensor, never an out-of-bounds read.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "accuracy/dtype.h"
#include "core/file_view.h"
#include "core/status.h"

namespace portkit::accuracy {

struct TensorInfo {
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  ///< byte range inside the data section
  /// Element strides from `begin` when the elements are not C-contiguous in [begin, end) (a torch
  /// view saved with its whole storage, a Fortran-order .npy; see tensor_data_file.h); empty
  /// otherwise, as always for safetensors.
  std::vector<int64_t> strides;
  uint64_t numel() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
  }
};

class SafetensorsFile {
 public:
  static Expected<SafetensorsFile> Open(const std::filesystem::path& path);
  /// The same from a file already mapped (`path` names it in errors): no second open and map.
  static Expected<SafetensorsFile> FromView(FileView view, const std::filesystem::path& path);

  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// The raw bytes of a tensor (little-endian elements).
  const uint8_t* Data(const TensorInfo& t) const { return data_ + t.begin; }
  /// Drops the pages of `count` elements of `t` from `first` on, once read (FileView::ReleaseRange).
  void Release(const TensorInfo& t, uint64_t first, uint64_t count) const {
    size_t size = DTypeSize(t.dtype);
    view_.ReleaseRange(Data(t) + first * size, count * size);
  }

 private:
  FileView view_;
  const uint8_t* data_ = nullptr;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace portkit::accuracy
