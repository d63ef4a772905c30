#pragma once
/// Finding the files of a project: Python sources (with their module names) and C++/CUDA
/// sources. Symbolic links are never followed (listed in `links`, with a note); unreadable,
/// binary, non-UTF-8, empty and oversized files, FIFOs and devices, and earlier portkit outputs
/// inside the project are reported, never fatal.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace portkit::analyse {

/// The default cap on one Python file (--max-file-mb). A tree-sitter tree takes 60-150 times its
/// source (8 MiB of torch calls: 491 MB; 9 MiB of `a = 1` lines: 1.38 GB), so 2 MiB keeps one
/// file's tree near 300 MB even for the densest code.
inline constexpr size_t kDefaultMaxPythonFileBytes = size_t{2} << 20;

struct SourceFile {
  std::filesystem::path path;
  std::string display;               ///< "<basename>/<relative path>" as shown in reports
  std::string rel;                   ///< path relative to the walked root, '/'-separated
  std::string module;                ///< canonical module name ("pkg.sub.mod")
  std::vector<std::string> aliases;  ///< other names the module is importable as
  bool is_package = false;
};

struct FileProblem {
  std::string file;
  uint32_t line = 0, col = 0;
  std::string kind;  ///< "skipped", "syntax_error", "symlink", "portkit_output", ...
  std::string message;
};

struct FileStats {
  size_t python_analysed = 0, cpp_scanned = 0, syntax_errors = 0, skipped = 0;
};

struct SourceSet {
  std::vector<SourceFile> python;
  std::vector<SourceFile> cpp;
  std::vector<SourceFile> others;  ///< every other regular file (copied by dynamic_shape)
  std::vector<SourceFile> links;   ///< symbolic links: never followed, copied as links
  std::vector<FileProblem> problems;
};

/// Walks `root` (sorted, deterministic). `display_prefix` is prepended to relative paths;
/// folders in `exclude` (e.g. the results folder) and hidden folders are not entered.
SourceSet DiscoverSources(const std::filesystem::path& root, const std::string& display_prefix,
                          const std::vector<std::filesystem::path>& exclude, size_t max_bytes);

/// Reads a Python file and checks it is text we can analyse: not binary, valid UTF-8, not larger
/// than `max_bytes` (checked before it is read: "PATH: over the limit: 58.0 MiB, more than the 2 MiB a
/// Python file may have; not analysed. --max-file-mb raises the limit"); an empty file is returned
/// as empty text. The text is the file's bytes exactly (a UTF-8 BOM included). The error says
/// which and names the file.
/// `decode_latin1`: a file that is not UTF-8 but declares Latin-1 or cp1252 in a PEP 263 coding
/// line (`# -*- coding: latin-1 -*-` on line 1 or 2) is returned converted to UTF-8, and
/// `*codec` (when given) says from which ("latin-1" or "cp1252"; empty for UTF-8): a command that
/// writes the file back encodes its text again with EncodeSource. A file declaring another
/// encoding is refused naming it.
Expected<std::string> LoadPythonSource(const SourceFile& f, size_t max_bytes, bool decode_latin1 = false,
                                       std::string* codec = nullptr);
/// `utf8`, text LoadPythonSource decoded from `codec` ("latin-1" or "cp1252"), in that codec again:
/// every character it decoded comes back as the same byte. kInvalidArgument ("line N: U+20AC cannot
/// be written in latin-1") when an edit added a character the codec does not have.
Expected<std::string> EncodeSource(std::string_view utf8, std::string_view codec);
/// "latin-1" or "cp1252" when `declared` (DeclaredEncoding) names one of them, else empty.
std::string_view SingleByteCodec(const std::string& declared);
/// The encoding a PEP 263 coding line on line 1 or 2 of `text` declares, lower-cased, or empty.
std::string DeclaredEncoding(std::string_view text);
/// `text` converted to UTF-8 when it is not valid UTF-8 and declares Latin-1 or cp1252 (as LoadPythonSource
/// with decode_latin1 does); otherwise `text` unchanged. Report columns are counted on this text.
std::string DecodeDeclaredLatin1(std::string text);

/// Position (1-based line, column) of the first invalid UTF-8 byte, or line 0 when valid.
std::pair<uint32_t, uint32_t> FirstInvalidUtf8(std::string_view s);

}  // namespace portkit::analyse
