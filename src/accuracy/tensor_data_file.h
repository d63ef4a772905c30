#pragma once
/// Tensor data files as `compare` reads them, behind one interface, all memory-mapped (FileView):
///  - a safetensors file: portkit's dumps, one file per operator, its tensors by key;
///  - one file per tensor, as msprobe writes in tensor mode (`dump_tensor_data/<data_name>`):
///    a torch.save file (.pt: a zip archive of stored entries, `*/data.pkl` read by the safe
///    pickle interpreter of torch_pickle.h, the storage `*/data/<key>`), or a .npy file (format
///    1.0/2.0/3.0, little-endian; C or Fortran order).
/// The kind is told by the first bytes. Every size, offset and stride in a header is checked
/// against the file, so a truncated file or a lying header is an error naming the file, never a
/// read out of bounds. Contiguous data is read in place; a tensor whose elements are not
/// contiguous (a view saved with its whole storage, a Fortran-order array) is gathered in pieces
/// of the caller's size (Elements), so memory stays bounded either way.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "accuracy/safetensors.h"
#include "core/file_view.h"
#include "core/status.h"

namespace portkit::accuracy {

/// The operator "file" of an msprobe dump in tensor mode: a folder of one file per tensor, each
/// tensor's file being its data_name (TensorDataPath).
inline constexpr std::string_view kTensorDataFolder = "dump_tensor_data/";

/// The file holding one tensor's data: `op_file` is its operator's file in the dump folder `dir`
/// (a safetensors file: the tensor is in it by key), or kTensorDataFolder (then the file is
/// `dir/dump_tensor_data/<data_name>`). An empty path when the dump holds no data for the tensor
/// (stats-only dumps, a tensor without data_name); kParse when data_name is not one file name.
Expected<std::filesystem::path> TensorDataPath(const std::filesystem::path& dir, std::string_view op_file,
                                               std::string_view data_name);

/// The default of TensorLimits::max_view_elements: 2^26 elements (a broadcast of 8192 x 8192).
inline constexpr uint64_t kDefaultMaxViewElements = uint64_t{1} << 26;

/// What a tensor file may make a reader do beyond the bytes it holds. A tensor whose elements are
/// all distinct elements of its storage costs work in proportion to the file; a view that reads
/// elements of its storage more than once (a stride of 0, as `expand` makes, or overlapping
/// strides, as `as_strided` can make) costs work in proportion to its logical shape, which a
/// header of a few bytes can make 2^50 elements: such a view is read only up to this many
/// elements, and refused beyond ("over the limit", kInvalidArgument).
struct TensorLimits {
  uint64_t max_view_elements = kDefaultMaxViewElements;  ///< 0: no cap
};

class TensorDataFile {
 public:
  /// Opens a safetensors, torch.save or .npy file. Errors (kParse / kIo / kNotFound) name the file:
  /// a compressed or encrypted zip entry, the legacy (pre-1.6) torch.save format, a pickle that
  /// refers to anything but a tensor's globals, a big-endian or object .npy, sizes that do not fit;
  /// kInvalidArgument ("over the limit") for a view that repeats storage elements beyond `limits`.
  static Expected<TensorDataFile> Open(const std::filesystem::path& path, const TensorLimits& limits = {});

  /// The tensor `key` of a safetensors file; the only tensor of a one-tensor file, whatever the
  /// key. nullptr when there is none.
  const TensorInfo* Find(const std::string& key) const;

  /// How the file names its element type, for messages: a torch storage class ("FloatStorage",
  /// "ComplexFloatStorage") or a .npy descr ("descr '<c8'"); empty for safetensors files.
  const std::string& TypeName() const { return type_name_; }

  /// `count` elements of `t` from element `first` on (C order), little-endian: a pointer into the
  /// mapped file when `t` is contiguous, else gathered into `scratch` (resized to count elements).
  /// The caller keeps first + count <= t.numel().
  const uint8_t* Elements(const TensorInfo& t, uint64_t first, size_t count, std::vector<uint8_t>& scratch) const;

  /// Drops the pages of `count` elements of `t` from `first` on, once read
  /// (FileView::ReleaseRange); for a gathered (strided) tensor, every page of its extent.
  void Release(const TensorInfo& t, uint64_t first, uint64_t count) const;

 private:
  std::optional<SafetensorsFile> safetensors_;
  FileView view_;                  ///< one-tensor files
  const uint8_t* base_ = nullptr;  ///< what single_'s begin / end count from
  TensorInfo single_;
  std::string type_name_;
};

}  // namespace portkit::accuracy
