#pragma once
/// Element types of tensor dumps (safetensors names) and their decoding to double.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace portkit::accuracy {

/// U16/U32/U64: torch 2.3+'s uint16/uint32/uint64 (safetensors names U16, U32, U64).
enum class DType : uint8_t {
  kF64,
  kF32,
  kF16,
  kBF16,
  kF8E4M3,
  kF8E5M2,
  kI64,
  kI32,
  kI16,
  kI8,
  kU64,
  kU32,
  kU16,
  kU8,
  kBool,
  kUnknown
};

DType ParseDType(std::string_view safetensors_name);
std::string_view DTypeName(DType t);
/// Bytes per element; 0 for kUnknown.
size_t DTypeSize(DType t);
bool IsFloating(DType t);
/// A tensor shape as reports and messages write it: "[2, 3]" (or with another separator).
std::string ShapeText(const std::vector<int64_t>& shape, std::string_view separator = ", ");

/// torch's name of an element type (`torch.float32` for F32, `torch.bfloat16` for BF16, ...), as
/// msprobe writes dtypes; the safetensors name itself for a type torch has no name for.
std::string TorchDTypeName(std::string_view safetensors_name);
/// A double as Python's repr() writes it (`1.0`, `0.1`, `1e-05`, `1e+16`, `inf`, `nan`): the
/// shortest digits that read back as the same double, fixed notation for exponents -4 to 15.
std::string PythonFloatRepr(double v);

double HalfToDouble(uint16_t h);
double BFloat16ToDouble(uint16_t b);
double Fp8E4M3ToDouble(uint8_t v);
double Fp8E5M2ToDouble(uint8_t v);

/// Element `i` of an integer or bool type exactly (0 for other types).
__int128 IntegerAt(DType t, const uint8_t* src, size_t i);

/// Decodes `count` elements of type `t` from `src` (little-endian) into `out`.
void DecodeToDouble(DType t, const uint8_t* src, size_t count, double* out);

}  // namespace portkit::accuracy
