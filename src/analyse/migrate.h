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

/// The line ending of `text`: that of its first line ("\r\n", "\r" or "\n"), "\n" when it has none.
std::string_view LineEnding(std::string_view text);

/// The 1-based line of byte `pos`, line ends being "\n", "\r\n" and a lone "\r" (as CPython reads).
uint32_t LineOfByte(std::string_view text, size_t pos);

/// One past the line end at or after `from` ("\r\n" counts as one), or npos when none follows.
size_t AfterLineEnd(std::string_view text, size_t from);

}  // namespace portkit::analyse
