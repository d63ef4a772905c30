#pragma once
/// The rewriting step of `portkit migrate` (RunMigrate, declared in analyse/api.h): byte-range
/// edits of a Python source.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace portkit::analyse {

/// One byte-range replacement in a source file.
struct Edit {
  uint32_t start_byte = 0, end_byte = 0;
  std::string replacement;
  uint32_t start_line = 0, end_line = 0;
  std::string operation;  ///< change_list.csv Operation Type
  std::string message;
  /// The edit class of `migrate --dry-run`'s summary: device_api, amp, device_string,
  /// distributed_backend, env_var, launch_script, arguments, cuda_library, fused_api, import.
  std::string edit_class;
};

/// Applies non-overlapping edits: sorted by position (an insertion, an empty range, before an
/// edit starting at the same byte); an edit overlapping an earlier, outer one is dropped. `edits`
/// keeps the applied ones.
std::string ApplyEdits(std::string_view text, std::vector<Edit>& edits);

/// The line ending of `text`: "\r\n" when its first line ends so, else "\n".
std::string_view LineEnding(std::string_view text);

}  // namespace portkit::analyse
