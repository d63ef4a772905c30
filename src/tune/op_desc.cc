#include "tune/op_desc.h"

#include <simdjson.h>

#include <algorithm>
#include <cstdio>

#include "core/json_writer.h"

namespace portkit::tune {
namespace {

std::string Shape(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

Status FieldError(std::string_view where, std::string_view field, std::string_view what) {
  return ParseError(std::string(where) + "." + std::string(field) + ": " + std::string(what));
}

Expected<std::vector<int64_t>> IntArray(simdjson::dom::element e, std::string_view where, std::string_view field,
                                        size_t want) {
  simdjson::dom::array arr;
  if (e.get_array().get(arr)) return FieldError(where, field, "expected an array of integers");
  std::vector<int64_t> out;
  for (auto v : arr) {
    int64_t x;
    if (v.get_int64().get(x)) return FieldError(where, field, "expected an array of integers");
    out.push_back(x);
  }
  if (want && out.size() != want)
    return FieldError(where, field,
                      "expected " + std::to_string(want) + " integers, got " + std::to_string(out.size()));
  return out;
}

constexpr int64_t kMaxDim = int64_t{1} << 20;

Status CheckShapes(OpDesc& op, std::string_view where) {
  for (size_t i = 0; i < op.inputs.size(); ++i)
    for (int64_t d : op.inputs[i])
      if (d <= 0 || d > kMaxDim)
        return FieldError(where, "inputs[" + std::to_string(i) + "]", "dimensions must be between 1 and 1048576");
  if (op.type == "MatMul") {
    if (op.inputs.size() != 2 || op.inputs[0].size() != 2 || op.inputs[1].size() != 2)
      return FieldError(where, "inputs", "MatMul takes two 2-D inputs, A[M,K] and B[K,N]");
    if (op.inputs[0][1] != op.inputs[1][0])
      return FieldError(where, "inputs",
                        "MatMul inner dimensions differ: A is [" + std::to_string(op.inputs[0][0]) + "," +
                            std::to_string(op.inputs[0][1]) + "], B is [" + std::to_string(op.inputs[1][0]) + "," +
                            std::to_string(op.inputs[1][1]) + "]");
    op.layout = "ND";
  } else {
    if (op.inputs.size() != 2 || op.inputs[0].size() != 4 || op.inputs[1].size() != 4)
      return FieldError(where, "inputs", "Conv2D takes a 4-D NCHW input and a 4-D OIHW weight");
    const auto& x = op.inputs[0];
    const auto& w = op.inputs[1];
    // groups divides the channels, so it is at most 2^20 too.
    if (op.groups < 1 || x[1] % op.groups || w[0] % op.groups)
      return FieldError(where, "attrs.groups", "groups must divide the input and output channels");
    if (w[1] * op.groups != x[1])
      return FieldError(where, "inputs",
                        "weight channels (" + std::to_string(w[1]) + ") x groups (" + std::to_string(op.groups) +
                            ") differ from input channels (" + std::to_string(x[1]) + ")");
    for (int i = 0; i < 2; ++i) {
      // Bounded like the dimensions so that the output-size arithmetic cannot overflow.
      if (op.stride[i] < 1 || op.stride[i] > kMaxDim)
        return FieldError(where, "attrs.stride", "strides must be between 1 and 1048576");
      if (op.padding[i] < 0 || op.padding[i] > kMaxDim)
        return FieldError(where, "attrs.padding", "padding must be between 0 and 1048576");
    }
    for (int i = 0; i < 2; ++i) {
      if (x[2 + i] + 2 * op.padding[i] < w[2 + i])
        return FieldError(where, "inputs", "the kernel is larger than the padded input");
    }
    op.layout = "NCHW";
  }
  return Status::Ok();
}

Expected<OpDesc> ParseOpElement(simdjson::dom::element e, std::string_view where, std::string* untuned_reason) {
  untuned_reason->clear();
  simdjson::dom::object obj;
  if (e.get_object().get(obj)) return ParseError(std::string(where) + ": expected an object");
  OpDesc op;
  bool dilated = false;
  std::string_view s;
  if (obj["op_type"].get_string().get(s)) return FieldError(where, "op_type", "missing or not a string");
  op.type = std::string(s);
  if (!obj["op_name"].get_string().get(s)) op.name = std::string(s);
  else if (obj["op_name"].error() == simdjson::NO_SUCH_FIELD) op.name = op.type;
  else return FieldError(where, "op_name", "not a string");
  if (auto d = obj["dtype"]; d.error() != simdjson::NO_SUCH_FIELD) {
    if (d.get_string().get(s)) return FieldError(where, "dtype", "not a string");
    op.dtype = std::string(s);
  }
  if (auto c = obj["count"]; c.error() != simdjson::NO_SUCH_FIELD) {
    if (c.get_int64().get(op.count) || op.count < 1) return FieldError(where, "count", "expected an integer >= 1");
  }
  if (op.type != "MatMul" && op.type != "Conv2D") {
    // Listed untuned whatever its other fields hold: the shapes are kept when they parse.
    simdjson::dom::array inputs;
    if (!obj["inputs"].get_array().get(inputs))
      for (auto in : inputs) {
        auto shape = IntArray(in, where, "inputs", 0);
        if (shape.ok()) op.inputs.push_back(std::move(*shape));
      }
    *untuned_reason = "operator type " + op.type + " has no tunable kernel (MatMul and Conv2D have)";
    return op;
  }
  simdjson::dom::array inputs;
  if (obj["inputs"].get_array().get(inputs)) return FieldError(where, "inputs", "missing or not an array of shapes");
  size_t i = 0;
  for (auto in : inputs) {
    auto shape = IntArray(in, where, "inputs[" + std::to_string(i++) + "]", 0);
    if (!shape.ok()) return shape.status();
    op.inputs.push_back(std::move(*shape));
  }
  if (auto a = obj["attrs"]; a.error() != simdjson::NO_SUCH_FIELD) {
    simdjson::dom::object attrs;
    if (a.get_object().get(attrs)) return FieldError(where, "attrs", "expected an object");
    for (auto field : attrs) {
      std::string name(field.key);
      if (name == "stride" || name == "padding") {
        auto v = IntArray(field.value, where, "attrs." + name, 2);
        if (!v.ok()) return v.status();
        int64_t* dst = name == "stride" ? op.stride : op.padding;
        dst[0] = (*v)[0];
        dst[1] = (*v)[1];
      } else if (name == "groups") {
        if (field.value.get_int64().get(op.groups)) return FieldError(where, "attrs.groups", "expected an integer");
      } else if (name == "dilation") {
        auto v = IntArray(field.value, where, "attrs.dilation", 2);
        if (!v.ok()) return v.status();
        dilated = (*v)[0] != 1 || (*v)[1] != 1;
      } else if (name == "bias") {
        if (field.value.get_bool().get(op.bias)) return FieldError(where, "attrs.bias", "expected true or false");
      }
    }
  }
  if (dilated) {
    PORTKIT_RETURN_IF_ERROR(CheckShapes(op, where));
    *untuned_reason = "dilated Conv2D is not tuned (dilation 1 only)";
    return op;
  }
  return ValidateOp(std::move(op), where, untuned_reason);
}

}  // namespace

Expected<OpDesc> ValidateOp(OpDesc op, std::string_view where, std::string* untuned_reason) {
  untuned_reason->clear();
  PORTKIT_RETURN_IF_ERROR(CheckShapes(op, where));
  // Every candidate and the double-precision reference run on this machine: refuse what would
  // not fit in memory or take hours (untuned, not an error).
  double elements = 0, macs = 0;
  for (const auto& in : op.inputs) {
    double n = 1;
    for (int64_t d : in) n *= static_cast<double>(d);
    elements = std::max(elements, n);
  }
  const auto& a = op.inputs[0];
  const auto& b = op.inputs[1];
  if (op.type == "MatMul") {
    elements = std::max(elements, static_cast<double>(a[0]) * static_cast<double>(b[1]));
    macs = static_cast<double>(a[0]) * static_cast<double>(a[1]) * static_cast<double>(b[1]);
  } else {
    double oh = static_cast<double>((a[2] + 2 * op.padding[0] - b[2]) / op.stride[0] + 1);
    double ow = static_cast<double>((a[3] + 2 * op.padding[1] - b[3]) / op.stride[1] + 1);
    double col = static_cast<double>(b[1] * b[2] * b[3]) * oh * ow;
    elements = std::max({elements, static_cast<double>(a[0] * b[0]) * oh * ow, col});
    macs = static_cast<double>(a[0] * b[0]) * oh * ow * static_cast<double>(b[1] * b[2] * b[3]);
  }
  if (elements > kMaxTensorElements || macs > kMaxMacs) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "too large to tune here (%.3g elements in its largest tensor, %.3g "
                  "multiply-adds; limits %.3g and %.3g)",
                  elements, macs, kMaxTensorElements, kMaxMacs);
    *untuned_reason = buf;
    return op;
  }
  if (op.dtype != "float32") *untuned_reason = "dtype " + op.dtype + " is not tuned (float32 kernels only)";
  return op;
}

std::string Signature(const OpDesc& op) {
  std::string s = op.type + "|" + op.dtype + "|" + op.layout + "|";
  for (size_t i = 0; i < op.inputs.size(); ++i) s += (i ? "," : "") + Shape(op.inputs[i]);
  s += std::string("|bias=") + (op.bias ? "1" : "0");
  if (op.type == "Conv2D")
    s += "|stride=" + Shape({op.stride[0], op.stride[1]}) + "|padding=" + Shape({op.padding[0], op.padding[1]}) +
         "|groups=" + std::to_string(op.groups);
  return s;
}

Expected<OpDesc> ParseOpJson(std::string_view json_object, std::string_view where, std::string* untuned_reason) {
  simdjson::dom::parser parser;
  simdjson::dom::element e;
  if (parser.parse(simdjson::padded_string(json_object)).get(e))
    return ParseError(std::string(where) + ": not valid JSON");
  return ParseOpElement(e, where, untuned_reason);
}

Expected<OpList> ParseOpList(std::string_view json, std::string_view file) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(simdjson::padded_string(json)).get(root))
    return ParseError(std::string(file) + ": not valid JSON (" + simdjson::error_message(err) + ")");
  simdjson::dom::object obj;
  if (root.get_object().get(obj))
    return ParseError(std::string(file) + ": expected an object {\"name\": ..., \"ops\": [...]}");
  OpList list;
  std::string_view s;
  if (!obj["name"].get_string().get(s)) list.name = std::string(s);
  simdjson::dom::array ops;
  if (obj["ops"].get_array().get(ops)) return ParseError(std::string(file) + ": ops: missing or not an array");
  size_t i = 0;
  for (auto e : ops) {
    std::string where = std::string(file) + ": ops[" + std::to_string(i++) + "]";
    std::string reason;
    auto op = ParseOpElement(e, where, &reason);
    if (!op.ok()) return op.status();
    if (!reason.empty()) list.untuned.push_back({std::move(*op), reason});
    else list.ops.push_back(std::move(*op));
  }
  return list;
}

std::string OpToJson(const OpDesc& op) {
  std::string out = "{\"op_name\": ";
  JsonWriter::AppendEscaped(out, op.name);
  out += ", \"op_type\": ";
  JsonWriter::AppendEscaped(out, op.type);
  out += ", \"inputs\": [";
  for (size_t i = 0; i < op.inputs.size(); ++i) out += (i ? ", " : "") + Shape(op.inputs[i]);
  out += "], \"attrs\": {\"bias\": ";
  out += op.bias ? "true" : "false";
  if (op.type == "Conv2D")
    out += ", \"stride\": " + Shape({op.stride[0], op.stride[1]}) +
           ", \"padding\": " + Shape({op.padding[0], op.padding[1]}) + ", \"groups\": " + std::to_string(op.groups);
  out += "}, \"dtype\": ";
  JsonWriter::AppendEscaped(out, op.dtype);
  out += ", \"count\": " + std::to_string(op.count) + "}";
  return out;
}

}  // namespace portkit::tune
