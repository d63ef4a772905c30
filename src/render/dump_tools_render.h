#pragma once
/// Renderers of the reports of RunOverflow, RunConvert and RunExtract (accuracy/api.h).
#include <string>

#include "accuracy/api.h"

namespace portkit::render {

/// The table of overflowing operators (first one marked); empty when there is none.
std::string OverflowText(const accuracy::OverflowReport& report);
/// {"dump", "operators", "first", "overflowing": [{index, name, phase, module, stack, reason}],
/// "warnings"}.
std::string OverflowJson(const accuracy::OverflowReport& report);
/// {"input", "output", "type", "written": [{file, source, widened}], "index_files", "widened",
/// "skipped", "failed": [{message, code}], "input_files", "input_files_failed"}.
std::string ConvertJson(const accuracy::ConvertReport& report);
/// {"input", "output", "format": "hdf5"|"dump", "extracted", "missing", "covered", "files",
/// "warnings"}.
std::string ExtractJson(const accuracy::ExtractReport& report);

}  // namespace portkit::render
