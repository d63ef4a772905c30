#pragma once
/// Renderers of the reports of RunOverflow, RunConvert and RunExtract (accuracy/api.h).
#include <string>

#include "accuracy/api.h"

namespace portkit::render {

/// The table of overflowing operators (the first and the origin marked), then a line naming the
/// origin of the first inf/nan; empty when nothing overflows.
std::string OverflowText(const accuracy::OverflowReport& report);
/// {"dump", "operators", "first", "origin", "origin_basis", "overflowing": [{index, name, phase,
/// module, stack, reason, deliberate}], "warnings"}; first and origin are null when there is none.
std::string OverflowJson(const accuracy::OverflowReport& report);
/// {"input", "output", "type", "written": [{file, source, widened}], "index_files", "widened",
/// "skipped", "failed": [{message, code}], "input_files", "input_files_failed"}.
std::string ConvertJson(const accuracy::ConvertReport& report);
/// {"input", "output", "format": "hdf5"|"dump", "extracted", "missing", "covered", "files",
/// "warnings"}.
std::string ExtractJson(const accuracy::ExtractReport& report);

}  // namespace portkit::render
