#pragma once
/// Operators to tune: the op list of `portkit tune --model` (see docs/tune.md), parsed into
/// descriptions with a signature string that keys the knowledge base.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace portkit::tune {

/// One operator of a model. For MatMul inputs are A[M,K] and B[K,N]; for Conv2D the NCHW input
/// and the OIHW weight.
struct OpDesc {
  std::string name;
  std::string type;
  std::vector<std::vector<int64_t>> inputs;
  std::string dtype = "float32";
  std::string layout;  ///< "ND" for MatMul, "NCHW" for Conv2D (the only layouts supported)
  int64_t count = 1;   ///< how often the model runs it per step
  bool bias = false;
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t groups = 1;
};

/// Size limits of a tunable operator (larger ones are listed untuned): 2^28 floats (1 GiB) per
/// tensor, 2^35 multiply-adds (the double-precision reference takes about 15 s; a candidate's
/// measuring child gets a timeout scaled with the FLOPs, see CandidateTimeoutSeconds).
constexpr double kMaxTensorElements = 268435456.0;
constexpr double kMaxMacs = 34359738368.0;

/// The signature that keys the knowledge base: type, dtype, layout, shapes and attributes, e.g.
/// `MatMul|float32|ND|[64,128],[128,96]|bias=1`.
std::string Signature(const OpDesc& op);

/// An operator the tuner does not handle, with the reason (listed in the result, not fatal).
struct UntunedOp {
  OpDesc op;
  std::string reason;
};

struct OpList {
  std::string name;
  std::vector<OpDesc> ops;  ///< supported operators, in file order
  std::vector<UntunedOp> untuned;
  /// Rows of the input that were left out before any operator was made of them, and why (one line
  /// each, naming the input): a profile store's events out of the importers' range.
  std::vector<std::string> left_out;
};

/// Parses an op list (JSON). `file` names the input in errors, which read
/// `FILE: ops[2].inputs: what is wrong`.
Expected<OpList> ParseOpList(std::string_view json, std::string_view file);

/// Parses one operator object (the elements of "ops"); `where` prefixes errors. Unknown types
/// and unsupported dtypes are returned with `*untuned_reason` set instead of an error.
Expected<OpDesc> ParseOpJson(std::string_view json_object, std::string_view where, std::string* untuned_reason);

/// Checks a MatMul or Conv2D description built elsewhere (a profile) exactly as the op list
/// does: shapes and attributes (an error, prefixed by `where`), then the size limits and the
/// dtype (`*untuned_reason` set). Sets the layout.
Expected<OpDesc> ValidateOp(OpDesc op, std::string_view where, std::string* untuned_reason);

/// The op as JSON (the op list element form), one line.
std::string OpToJson(const OpDesc& op);

}  // namespace portkit::tune
