#pragma once
/// Console tables in the seed's style:
///   +-------+------------+
///   | files | statistics |
///   +-------+------------+
#include <string>
#include <vector>

namespace portkit {

std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

}  // namespace portkit
