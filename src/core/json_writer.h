#pragma once
/// A small streaming JSON writer producing deterministic, indented output.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace portkit {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  /// Inside an object: the key of the next value.
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Double(double value);
  /// The shortest text that reads back as the same double (std::to_chars); null when not finite.
  JsonWriter& Shortest(double value);
  /// A number with `decimals` digits after the point (null when not finite).
  JsonWriter& Fixed(double value, int decimals);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  const std::string& str() const { return out_; }
  /// Bytes of output not yet taken.
  size_t size() const { return out_.size(); }
  /// The output so far, moved out (the writer goes on where it was: a large document can be
  /// written out piece by piece).
  std::string Take() {
    std::string out;
    out.swap(out_);
    return out;
  }
  /// Empties the output so far, keeping its buffer (FlushPiece in render/compare_render.h).
  void Clear() { out_.clear(); }
  /// Room for `bytes` of output at once (a large document then grows without copies).
  void Reserve(size_t bytes) { out_.reserve(bytes); }

  static void AppendEscaped(std::string& out, std::string_view s);

 private:
  void BeforeValue();
  void Newline();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace portkit
