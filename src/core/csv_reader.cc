#include "core/csv_reader.h"

#include <filesystem>

#include "core/atomic_file.h"

namespace portkit {

Status CsvStreamParser::TooLong() const {
  return InvalidArgument(path_ + ":" + std::to_string(record_line_) + ": a record longer than " +
                         std::to_string(max_record_bytes_ >> 20) + " MiB (an unterminated quote?); not read further");
}

Status CsvStreamParser::EndRecord(const RecordFn& on_record) {
  row_.push_back(std::move(field_));
  field_.clear();
  quoted_ = false;
  delivered_line_ = record_line_;
  Status st = on_record(row_);
  row_.clear();
  record_bytes_ = 0;
  record_line_ = ++line_;
  return st;
}

Status CsvStreamParser::Feed(std::string_view text, const RecordFn& on_record) {
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') continue;
    }
    if (quote_pending_) {
      quote_pending_ = false;
      if (c == '"') {  // a doubled quote inside a quoted field
        field_.push_back('"');
        if (++record_bytes_ > max_record_bytes_) return TooLong();
        continue;
      }
      in_quotes_ = false;  // that quote closed the field; `c` is read as outside quotes below
    }
    if (in_quotes_) {
      if (c == '"') {
        quote_pending_ = true;
      } else {
        if (c == '\n') ++line_;
        field_.push_back(c);
        if (++record_bytes_ > max_record_bytes_) return TooLong();
      }
      continue;
    }
    if (c == '"') {
      if (!field_.empty() || quoted_)
        return ParseError(path_ + ":" + std::to_string(line_) + ": unexpected quote inside a field");
      in_quotes_ = quoted_ = true;
    } else if (c == ',') {
      row_.push_back(std::move(field_));
      field_.clear();
      quoted_ = false;
      if (++record_bytes_ > max_record_bytes_) return TooLong();
    } else if (c == '\n' || c == '\r') {
      after_cr_ = c == '\r';
      PORTKIT_RETURN_IF_ERROR(EndRecord(on_record));
    } else {
      if (quoted_) return ParseError(path_ + ":" + std::to_string(line_) + ": text after a closing quote");
      field_.push_back(c);
      if (++record_bytes_ > max_record_bytes_) return TooLong();
    }
  }
  return Status::Ok();
}

Status CsvStreamParser::Finish(const RecordFn& on_record) {
  if (quote_pending_) {
    quote_pending_ = false;
    in_quotes_ = false;
  }
  if (in_quotes_) return ParseError(path_ + ":" + std::to_string(record_line_) + ": unterminated quoted field");
  if (!field_.empty() || !row_.empty() || quoted_) return EndRecord(on_record);
  return Status::Ok();
}

Expected<CsvRows> ParseCsv(std::string_view text, const std::string& path) {
  CsvRows rows;
  CsvStreamParser parser(path);
  auto keep = [&](std::vector<std::string>& record) {
    rows.push_back(std::move(record));
    return Status::Ok();
  };
  PORTKIT_RETURN_IF_ERROR(parser.Feed(text, keep));
  PORTKIT_RETURN_IF_ERROR(parser.Finish(keep));
  return rows;
}

Expected<CsvRows> ReadCsvFile(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) return IoError(path + ": cannot read: " + ec.message());
  if (size > max_bytes)
    return InvalidArgument(path + ": " + std::to_string(size >> 20) + " MiB is larger than the " +
                           std::to_string(max_bytes >> 20) + " MiB a results CSV may have");
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseCsv(*text, path);
}

}  // namespace portkit
