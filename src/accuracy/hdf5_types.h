#pragma once
/// Mapping of HDF5 element types to our DType, kept free of the HDF5 headers so it can be tested
/// on its own: hdf5_dump.cc fills an Hdf5TypeInfo from the library (H5Tget_class, H5Tget_size,
/// H5Tget_fields, ...) and asks MapHdf5Type what the tensor is.
///
/// Accepted (anything else is kUnsupported, with a message saying what the type is):
/// - IEEE floats by their bit layout (class, size, precision, sign/exponent/mantissa fields, bias),
///   any byte order: binary64 → F64, binary32 → F32, binary16 (h5py's float16; HDF5 1.10 has no
///   predefined 16-bit float) → F16, and the bfloat16 layout (1-8-7, bias 127) → BF16;
/// - a 16-bit opaque type whose tag names bfloat16 (`bfloat16`, `bf16`) → BF16 (little-endian);
/// - integers without padding bits: signed 8/16/32/64 → I8/I16/I32/I64, unsigned 8 → U8; unsigned
///   16 → I32 and unsigned 32 → I64 (widened, exact; our dtypes have no wider unsigned type);
///   unsigned 64 is refused (no exact target);
/// - enums: h5py's bool (1 byte, members FALSE=0 and TRUE=1) → BOOL, any other enum → its base
///   integer type.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "accuracy/dtype.h"
#include "core/status.h"

namespace portkit::accuracy {

struct Hdf5TypeInfo {
  enum class Class { kInteger, kFloat, kEnum, kOpaque, kOther };
  Class cls = Class::kOther;
  std::string class_name;  ///< for messages when cls is kOther (string, compound, ...)
  size_t size = 0;         ///< bytes
  bool big_endian = false;
  bool is_signed = true;             ///< integers (enums: of the base type)
  size_t precision = 0, offset = 0;  ///< significant bits and their offset
  // Floats.
  size_t sign_pos = 0, exp_pos = 0, exp_size = 0, mant_pos = 0, mant_size = 0, exp_bias = 0;
  // Enums: member names and values (size/is_signed describe the base integer type).
  std::vector<std::pair<std::string, int64_t>> members;
  // Opaque types.
  std::string tag;
};

/// What a stored element type becomes, and whether that changes the values' representation.
struct Hdf5TypeMapping {
  DType dtype = DType::kUnknown;
  bool widened = false;  ///< u16 → i32, u32 → i64 (values unchanged)
};

/// The DType for a stored HDF5 type, or kUnsupported naming the type (see the list above).
Expected<Hdf5TypeMapping> MapHdf5Type(const Hdf5TypeInfo& t);

/// A short description such as `16-bit float (1-5-10, bias 15)` or `unsigned 64-bit integer`.
std::string DescribeHdf5Type(const Hdf5TypeInfo& t);

/// Natural order for HDF5 link names: digit runs compare as numbers (`2` < `10`), the rest
/// byte-wise; ties broken byte-wise so the order is total.
bool NaturalLess(const std::string& a, const std::string& b);

}  // namespace portkit::accuracy
