#pragma once
/// RFC 4180 CSV output with CSV-injection protection: a cell starting with = + - @ % (or a tab
/// or carriage return) is prefixed with a single quote so spreadsheets do not evaluate it; plain
/// numbers ("-0.25", "+1e-5") keep their sign.
#include <string>
#include <string_view>
#include <vector>

namespace portkit {

class CsvWriter {
 public:
  explicit CsvWriter(const std::vector<std::string>& header);
  void AddRow(const std::vector<std::string>& cells);
  size_t rows() const { return rows_; }
  /// The whole document, header included, LF line ends.
  const std::string& str() const { return out_; }
  /// Bytes of output not yet taken.
  size_t size() const { return out_.size(); }
  /// The output so far, moved out (rows added later follow it: a large document can be written
  /// out piece by piece).
  std::string Take() {
    std::string out;
    out.swap(out_);
    return out;
  }
  /// Empties the output so far, keeping its buffer (FlushPiece in render/compare_render.h).
  void Clear() { out_.clear(); }
  /// Room for `bytes` of output at once (a large document then grows without copies).
  void Reserve(size_t bytes) { out_.reserve(bytes); }

  /// One cell as it is written: neutralised and quoted when needed.
  static std::string EscapeCell(std::string_view cell);
  /// Appends the escaped cell to `out`.
  static void AppendCell(std::string& out, std::string_view cell);

 private:
  void AppendRow(const std::vector<std::string>& cells);
  std::string out_;
  size_t columns_;
  size_t rows_ = 0;
};

}  // namespace portkit
