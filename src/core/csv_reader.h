#pragma once
/// RFC 4180 CSV reading (quoted fields, doubled quotes, newlines inside quotes), whole or streamed.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace portkit {

using CsvRows = std::vector<std::vector<std::string>>;

/// Incremental CSV parser: bytes go in by Feed() in pieces of any size (a quote pair or a CRLF may
/// be split between two pieces), whole records come out through the callback. Memory is one
/// record, never the file: a record over `max_record_bytes` is an error (an unterminated quote in
/// a 4 GiB file must not make a 4 GiB field). Errors read `path:line: what`.
class CsvStreamParser {
 public:
  /// Called once per record, in order; a non-ok Status stops the parse and is returned.
  using RecordFn = std::function<Status(std::vector<std::string>& record)>;

  explicit CsvStreamParser(std::string path, size_t max_record_bytes = std::numeric_limits<size_t>::max())
      : path_(std::move(path)), max_record_bytes_(max_record_bytes) {}

  Status Feed(std::string_view bytes, const RecordFn& on_record);
  /// The end of the input: delivers a last record without a line end; an open quote is an error.
  Status Finish(const RecordFn& on_record);
  /// The line (1-based) where the record last delivered starts.
  size_t record_line() const { return delivered_line_; }

 private:
  Status EndRecord(const RecordFn& on_record);
  Status TooLong() const;

  std::string path_;
  size_t max_record_bytes_;
  std::vector<std::string> row_;
  std::string field_;
  size_t record_bytes_ = 0;
  size_t line_ = 1, record_line_ = 1, delivered_line_ = 0;
  bool in_quotes_ = false, quoted_ = false;
  bool quote_pending_ = false;  // a '"' inside quotes was the last byte seen: "" or the closing one
  bool after_cr_ = false;       // a '\r' ended the last record: a '\n' right after it belongs to it
};

/// Parses `text`; errors read `path:line: what` (line of the record that is wrong).
Expected<CsvRows> ParseCsv(std::string_view text, const std::string& path);

/// Reads and parses a CSV file no larger than `max_bytes`.
Expected<CsvRows> ReadCsvFile(const std::string& path, size_t max_bytes);

}  // namespace portkit
