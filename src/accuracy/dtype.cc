#include "accuracy/dtype.h"

#include "accuracy/metrics/simd.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

namespace portkit::accuracy {

DType ParseDType(std::string_view s) {
  if (s == "F64") return DType::kF64;
  if (s == "F32") return DType::kF32;
  if (s == "F16") return DType::kF16;
  if (s == "BF16") return DType::kBF16;
  if (s == "F8_E4M3") return DType::kF8E4M3;
  if (s == "F8_E5M2") return DType::kF8E5M2;
  if (s == "I64") return DType::kI64;
  if (s == "I32") return DType::kI32;
  if (s == "I16") return DType::kI16;
  if (s == "I8") return DType::kI8;
  if (s == "U64") return DType::kU64;
  if (s == "U32") return DType::kU32;
  if (s == "U16") return DType::kU16;
  if (s == "U8") return DType::kU8;
  if (s == "BOOL") return DType::kBool;
  return DType::kUnknown;
}

std::string ShapeText(const std::vector<int64_t>& shape, std::string_view separator) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += separator;
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF64: return "F64";
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kF8E5M2: return "F8_E5M2";
    case DType::kI64: return "I64";
    case DType::kI32: return "I32";
    case DType::kI16: return "I16";
    case DType::kI8: return "I8";
    case DType::kU64: return "U64";
    case DType::kU32: return "U32";
    case DType::kU16: return "U16";
    case DType::kU8: return "U8";
    case DType::kBool: return "BOOL";
    case DType::kUnknown: return "?";
  }
  return "?";
}

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF64:
    case DType::kI64:
    case DType::kU64: return 8;
    case DType::kF32:
    case DType::kI32:
    case DType::kU32: return 4;
    case DType::kF16:
    case DType::kBF16:
    case DType::kI16:
    case DType::kU16: return 2;
    case DType::kF8E4M3:
    case DType::kF8E5M2:
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: return 1;
    case DType::kUnknown: return 0;
  }
  return 0;
}

bool IsFloating(DType t) {
  return t == DType::kF64 || t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF8E4M3 ||
         t == DType::kF8E5M2;
}

double HalfToDouble(uint16_t h) {
  int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  double v;
  if (exp == 0) v = std::ldexp(static_cast<double>(mant), -24);  // zero and subnormals
  else if (exp == 31) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(static_cast<double>(mant | 0x400), exp - 25);
  return sign ? -v : v;
}

double BFloat16ToDouble(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

double Fp8E4M3ToDouble(uint8_t v) {
  // E4M3 (OCP "fn"): bias 7, no infinities, S.1111.111 is NaN.
  int sign = v >> 7, exp = (v >> 3) & 0xF, mant = v & 0x7;
  double r;
  if (exp == 0xF && mant == 0x7) return std::numeric_limits<double>::quiet_NaN();
  if (exp == 0) r = std::ldexp(static_cast<double>(mant), -9);
  else r = std::ldexp(static_cast<double>(mant | 0x8), exp - 10);
  return sign ? -r : r;
}

double Fp8E5M2ToDouble(uint8_t v) {
  // E5M2: bias 15, IEEE-like infinities and NaNs; the top byte of an fp16.
  return HalfToDouble(static_cast<uint16_t>(v) << 8);
}

__int128 IntegerAt(DType t, const uint8_t* src, size_t i) {
  auto load = [&](auto v) {
    std::memcpy(&v, src + i * sizeof v, sizeof v);
    return static_cast<__int128>(v);
  };
  switch (t) {
    case DType::kI64: return load(int64_t{});
    case DType::kI32: return load(int32_t{});
    case DType::kI16: return load(int16_t{});
    case DType::kI8: return load(int8_t{});
    case DType::kU64: return load(uint64_t{});
    case DType::kU32: return load(uint32_t{});
    case DType::kU16: return load(uint16_t{});
    case DType::kU8:
    case DType::kBool: return load(uint8_t{});
    default: return 0;
  }
}

#ifdef PORTKIT_ACCURACY_AVX2
namespace {
/// fp32 → double eight at a time (the widening every fp32 compare pays first).
PORTKIT_AVX2_FN void F32ToDoubleAvx2(const uint8_t* src, size_t count, double* out) {
  using V8f = float __attribute__((vector_size(32)));
  using V4f = float __attribute__((vector_size(16)));
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    V8f v;
    std::memcpy(&v, src + 4 * i, sizeof v);
    const V4f lo = {v[0], v[1], v[2], v[3]}, hi = {v[4], v[5], v[6], v[7]};
    const simd::V4d a = __builtin_convertvector(lo, simd::V4d), b = __builtin_convertvector(hi, simd::V4d);
    simd::Store(out + i, a);
    simd::Store(out + i + 4, b);
  }
  for (; i < count; ++i) {
    float f;
    std::memcpy(&f, src + 4 * i, 4);
    out[i] = f;
  }
}
}  // namespace
#endif

void DecodeToDouble(DType t, const uint8_t* src, size_t count, double* out) {
  switch (t) {
    case DType::kF64: std::memcpy(out, src, count * 8); return;
    case DType::kF32:
#ifdef PORTKIT_ACCURACY_AVX2
      if (static const bool avx2 = simd::CpuHasAvx2(); avx2) return F32ToDoubleAvx2(src, count, out);
#endif
      for (size_t i = 0; i < count; ++i) {
        float f;
        std::memcpy(&f, src + 4 * i, 4);
        out[i] = f;
      }
      return;
    case DType::kF16:
    case DType::kBF16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = t == DType::kF16 ? HalfToDouble(h) : BFloat16ToDouble(h);
      }
      return;
    case DType::kF8E4M3:
      for (size_t i = 0; i < count; ++i) out[i] = Fp8E4M3ToDouble(src[i]);
      return;
    case DType::kF8E5M2:
      for (size_t i = 0; i < count; ++i) out[i] = Fp8E5M2ToDouble(src[i]);
      return;
    case DType::kI64:
      for (size_t i = 0; i < count; ++i) {
        int64_t x;
        std::memcpy(&x, src + 8 * i, 8);
        out[i] = static_cast<double>(x);
      }
      return;
    case DType::kI32:
      for (size_t i = 0; i < count; ++i) {
        int32_t x;
        std::memcpy(&x, src + 4 * i, 4);
        out[i] = x;
      }
      return;
    case DType::kI16:
      for (size_t i = 0; i < count; ++i) {
        int16_t x;
        std::memcpy(&x, src + 2 * i, 2);
        out[i] = x;
      }
      return;
    case DType::kI8:
      for (size_t i = 0; i < count; ++i) out[i] = static_cast<int8_t>(src[i]);
      return;
    case DType::kU64:  // values above 2^53 are rounded to the nearest double
      for (size_t i = 0; i < count; ++i) {
        uint64_t x;
        std::memcpy(&x, src + 8 * i, 8);
        out[i] = static_cast<double>(x);
      }
      return;
    case DType::kU32:
      for (size_t i = 0; i < count; ++i) {
        uint32_t x;
        std::memcpy(&x, src + 4 * i, 4);
        out[i] = x;
      }
      return;
    case DType::kU16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t x;
        std::memcpy(&x, src + 2 * i, 2);
        out[i] = x;
      }
      return;
    case DType::kU8:
    case DType::kBool:
      for (size_t i = 0; i < count; ++i) out[i] = src[i];
      return;
    case DType::kUnknown:
      for (size_t i = 0; i < count; ++i) out[i] = std::numeric_limits<double>::quiet_NaN();
      return;
  }
}

std::string TorchDTypeName(std::string_view safetensors_name) {
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {{"F64", "torch.float64"},
                                                                             {"F32", "torch.float32"},
                                                                             {"F16", "torch.float16"},
                                                                             {"BF16", "torch.bfloat16"},
                                                                             {"F8_E4M3", "torch.float8_e4m3fn"},
                                                                             {"F8_E5M2", "torch.float8_e5m2"},
                                                                             {"I64", "torch.int64"},
                                                                             {"I32", "torch.int32"},
                                                                             {"I16", "torch.int16"},
                                                                             {"I8", "torch.int8"},
                                                                             {"U64", "torch.uint64"},
                                                                             {"U32", "torch.uint32"},
                                                                             {"U16", "torch.uint16"},
                                                                             {"U8", "torch.uint8"},
                                                                             {"BOOL", "torch.bool"}};
  for (const auto& [st, torch_name] : kNames)
    if (st == safetensors_name) return std::string(torch_name);
  return std::string(safetensors_name);
}

std::string PythonFloatRepr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // The shortest round-trip digits, d.ddd e±X, then laid out as Python's repr does.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const size_t e_at = sci.find('e');
  std::string digits = sci.substr(0, 1) + (e_at > 2 ? sci.substr(2, e_at - 2) : "");
  const int exponent = std::stoi(sci.substr(e_at + 1));
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out +=
          digits.substr(0, static_cast<size_t>(exponent) + 1) + "." + digits.substr(static_cast<size_t>(exponent) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', exponent < 0 ? -exponent : exponent);
  return out + exp;
}

}  // namespace portkit::accuracy
