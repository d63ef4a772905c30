#pragma once
/// Renderer of `prof query`: one table of an imported profile (events, ops, steps, comm) as CSV or
/// JSON, written piece by piece so that a table of millions of events never sits in memory whole.
#include <string>
#include <string_view>
#include <vector>

#include "core/csv_writer.h"
#include "core/json_writer.h"
#include "prof/api.h"

namespace portkit::render {

/// A column of a query table: its name and how JSON writes it.
struct QueryColumn {
  enum class Type { kText, kInt, kBool };
  std::string_view name;
  Type type = Type::kText;
};

/// The names of the tables `prof query` writes: events, ops, steps, comm.
const std::vector<std::string>& ProfQueryTables();
/// The columns of `table` (one of ProfQueryTables; empty for another name).
const std::vector<QueryColumn>& ProfQueryColumns(std::string_view table);

/// The cells of one row, in the order of its table's columns (integers in decimal, booleans as
/// true/false, texts as stored).
std::vector<std::string> ProfQueryCells(const prof::EventRow& row);
std::vector<std::string> ProfQueryCells(const prof::OpRow& row);
std::vector<std::string> ProfQueryCells(const prof::StepRow& row);
std::vector<std::string> ProfQueryCells(const prof::CommRow& row);

/// Writes one table: CSV (a header line, then one line per row; cells guarded against formula
/// injection as every CSV of portkit) or JSON (an array of objects keyed by the column names,
/// integers and booleans as JSON numbers and booleans).
class ProfQueryWriter {
 public:
  ProfQueryWriter(bool json, const std::vector<QueryColumn>& columns);
  void AddRow(const std::vector<std::string>& cells);
  /// Bytes of output not yet taken.
  size_t size() const { return json_ ? j_.size() : csv_.size(); }
  /// The output so far, moved out.
  std::string Take() { return json_ ? j_.Take() : csv_.Take(); }
  /// The rest of the document (the JSON array's end).
  std::string Finish();

 private:
  static std::vector<std::string> Header(const std::vector<QueryColumn>& columns);
  bool json_;
  const std::vector<QueryColumn>& columns_;
  CsvWriter csv_;
  JsonWriter j_;
};

}  // namespace portkit::render
