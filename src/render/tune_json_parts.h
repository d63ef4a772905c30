#pragma once
/// Pieces shared by the tuning engine's JSON renderers (tune_json.cc, tune_result.cc).
#include <string_view>
#include <vector>

#include "core/json_writer.h"
#include "tune/api.h"

namespace portkit::render {

/// `"op_name": …, "op_type": …` of one operator, inside an object the caller opened.
inline JsonWriter& OpIdentity(JsonWriter& w, const tune::OpDesc& op) {
  return w.Key("op_name").String(op.name).Key("op_type").String(op.type);
}

/// `"key": [{"op_name", "op_type", "reason"}, …]`: the operators that were not tuned, and why.
inline void UntunedArray(JsonWriter& w, std::string_view key, const std::vector<tune::UntunedOp>& untuned) {
  w.Key(key).BeginArray();
  for (const auto& u : untuned) {
    w.BeginObject();
    OpIdentity(w, u.op).Key("reason").String(u.reason).EndObject();
  }
  w.EndArray();
}

}  // namespace portkit::render
