#pragma once
/// Console tables in the original tool's style:
///   +-------+------------+
///   | files | statistics |
///   +-------+------------+
#include <string>
#include <vector>

namespace portkit {

std::string RenderTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

}  // namespace portkit
