#include "accuracy/hdf5_types.h"

#include <algorithm>
#include <cctype>

namespace portkit::accuracy {
namespace {

struct FloatLayout {
  size_t size, sign_pos, exp_pos, exp_size, mant_pos, mant_size, bias;
  DType dtype;
};

constexpr FloatLayout kFloats[] = {
    {8, 63, 52, 11, 0, 52, 1023, DType::kF64},
    {4, 31, 23, 8, 0, 23, 127, DType::kF32},
    {2, 15, 10, 5, 0, 10, 15, DType::kF16},
    {2, 15, 7, 8, 0, 7, 127, DType::kBF16},
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Expected<Hdf5TypeMapping> MapInteger(size_t size, bool is_signed, size_t precision, size_t offset,
                                     const Hdf5TypeInfo& t) {
  if (precision != size * 8 || offset != 0)
    return Status(ErrorCode::kUnsupported, DescribeHdf5Type(t) + " with padding bits is not supported");
  if (is_signed) {
    switch (size) {
      case 1: return Hdf5TypeMapping{DType::kI8, false};
      case 2: return Hdf5TypeMapping{DType::kI16, false};
      case 4: return Hdf5TypeMapping{DType::kI32, false};
      case 8: return Hdf5TypeMapping{DType::kI64, false};
      default: break;
    }
  } else {
    switch (size) {
      case 1: return Hdf5TypeMapping{DType::kU8, false};
      case 2: return Hdf5TypeMapping{DType::kI32, true};
      case 4: return Hdf5TypeMapping{DType::kI64, true};
      default: break;
    }
  }
  return Status(ErrorCode::kUnsupported, DescribeHdf5Type(t) + " is not supported (no exact tensor dtype)");
}

}  // namespace

std::string DescribeHdf5Type(const Hdf5TypeInfo& t) {
  std::string bits = std::to_string(t.size * 8) + "-bit";
  switch (t.cls) {
    case Hdf5TypeInfo::Class::kInteger: return std::string(t.is_signed ? "signed " : "unsigned ") + bits + " integer";
    case Hdf5TypeInfo::Class::kFloat:
      return bits + " float (" + std::to_string(t.exp_size) + "-bit exponent, " + std::to_string(t.mant_size) +
             "-bit mantissa, bias " + std::to_string(t.exp_bias) + ")";
    case Hdf5TypeInfo::Class::kEnum: return bits + " enum of " + std::to_string(t.members.size()) + " members";
    case Hdf5TypeInfo::Class::kOpaque: return bits + " opaque type" + (t.tag.empty() ? "" : " '" + t.tag + "'");
    case Hdf5TypeInfo::Class::kOther: return (t.class_name.empty() ? "unknown" : t.class_name) + " type";
  }
  return "unknown type";
}

Expected<Hdf5TypeMapping> MapHdf5Type(const Hdf5TypeInfo& t) {
  switch (t.cls) {
    case Hdf5TypeInfo::Class::kFloat:
      for (const auto& f : kFloats) {
        if (t.size == f.size && t.precision == f.size * 8 && t.offset == 0 && t.sign_pos == f.sign_pos &&
            t.exp_pos == f.exp_pos && t.exp_size == f.exp_size && t.mant_pos == f.mant_pos &&
            t.mant_size == f.mant_size && t.exp_bias == f.bias)
          return Hdf5TypeMapping{f.dtype, false};
      }
      return Status(ErrorCode::kUnsupported, DescribeHdf5Type(t) + " is not an IEEE binary64/32/16 or bfloat16 layout");
    case Hdf5TypeInfo::Class::kInteger: return MapInteger(t.size, t.is_signed, t.precision, t.offset, t);
    case Hdf5TypeInfo::Class::kEnum: {
      if (t.size == 1 && t.members.size() == 2) {
        bool has_false = false, has_true = false;
        for (const auto& [name, value] : t.members) {
          std::string n = Lower(name);
          has_false |= n == "false" && value == 0;
          has_true |= n == "true" && value == 1;
        }
        if (has_false && has_true) return Hdf5TypeMapping{DType::kBool, false};
      }
      // Other enums: their integer values (the base type has no padding for the types we meet).
      return MapInteger(t.size, t.is_signed, t.size * 8, 0, t);
    }
    case Hdf5TypeInfo::Class::kOpaque: {
      std::string tag = Lower(t.tag);
      if (t.size == 2 && (tag.find("bfloat16") != std::string::npos || tag.find("bf16") != std::string::npos))
        return Hdf5TypeMapping{DType::kBF16, false};
      return Status(ErrorCode::kUnsupported,
                    DescribeHdf5Type(t) + " is not supported (only a 16-bit 'bfloat16' tag is)");
    }
    case Hdf5TypeInfo::Class::kOther: break;
  }
  return Status(ErrorCode::kUnsupported, DescribeHdf5Type(t) + " is not a tensor element type");
}

bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    bool da = std::isdigit(static_cast<unsigned char>(a[i])), db = std::isdigit(static_cast<unsigned char>(b[j]));
    if (da && db) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      size_t is = i, js = j;  // skip leading zeros, then shorter is smaller
      while (is + 1 < ie && a[is] == '0') ++is;
      while (js + 1 < je && b[js] == '0') ++js;
      if (ie - is != je - js) return ie - is < je - js;
      int c = a.compare(is, ie - is, b, js, je - js);
      if (c != 0) return c < 0;
      i = ie;
      j = je;
      continue;
    }
    if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
    ++i;
    ++j;
  }
  if (i < a.size() || j < b.size()) return i >= a.size();  // a prefix comes first
  return a < b;
}

}  // namespace portkit::accuracy
