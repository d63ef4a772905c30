#pragma once
/// The one place where portkit decides how it reads what the user gives it and names what it
/// writes (docs/safety.md):
/// - Links: a symbolic link inside an input is never followed. Walks list it as a link (analysis
///   skips it with a note; copies re-create it as a link with the same target text, never the
///   file it points to); a tensor file named by a manifest that is a link is refused. A path given
///   on the command line (-i, -o, ...) that is itself a symbolic link is refused.
/// - Files that are not regular: FIFOs, devices, sockets and folders are refused before a read can
///   block (opened with O_NONBLOCK and checked with fstat).
/// - Outputs: names derived from input data go through SafeFileName; every folder a command
///   creates carries the marker kOutputMarker, and walks of an input skip marked folders below
///   their root (the output of one tool is never the input of another by accident).
/// - Generated code: text from input pasted into Python goes through PythonStringLiteral.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace portkit {

/// Whether a symbolic link as the last component of a path is followed.
enum class Links { kFollow, kRefuse };

/// An open file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  /// Gives up ownership: the caller closes the descriptor.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

/// Opens `path` read-only (blocking reads) when it is a regular file. A FIFO, device, socket or
/// folder is refused without blocking: "PATH: not a regular file (a FIFO); not read". With
/// Links::kRefuse a symbolic link is refused too: "PATH: is a symbolic link; not followed".
/// Errors are kIo (cannot open) or kInvalidArgument (wrong kind of file) and name the path.
Expected<UniqueFd> OpenInputFile(const std::filesystem::path& path, Links links = Links::kFollow);

/// What kind of thing `path` is, without following a link and without opening it: "a symbolic
/// link", "a FIFO", "a socket", "a character device", "a block device", "a folder", "a regular
/// file", or "missing".
std::string DescribeFileType(const std::filesystem::path& path);

/// kInvalidArgument when `path` itself (its last component) is a symbolic link:
/// "`what` PATH is a symbolic link (to TARGET); give the path it points to". Links in the parent
/// folders are the user's own layout and are accepted.
Status RefuseSymlinkedPath(const std::filesystem::path& path, std::string_view what);

// ---- walking an input ------------------------------------------------------------------------

struct InputEntry {
  enum class Kind {
    kFile,        ///< a regular file
    kLink,        ///< a symbolic link (to anything): never followed
    kSpecial,     ///< a FIFO, socket or device: never read
    kOutput,      ///< a folder holding kOutputMarker (an earlier portkit run's output): not entered
    kUnreadable,  ///< a folder that could not be listed (`note` says why)
  };
  std::filesystem::path path;
  std::string rel;  ///< relative to the root, '/'-separated
  Kind kind = Kind::kFile;
  std::string note;
};

struct WalkOptions {
  /// Folders not entered and not reported (compared after weakly_canonical).
  std::vector<std::filesystem::path> exclude;
  /// Folder names not entered and not reported (e.g. "__pycache__").
  std::vector<std::string> skip_folder_names;
  /// Folders whose name starts with '.' are not entered and not reported.
  bool skip_hidden_folders = false;
  /// Deeper folders are reported as kUnreadable instead of entered.
  size_t max_depth = 128;
};

/// Walks `root` (a folder) depth first in sorted name order, never following a symbolic link and
/// never entering a marked output folder below the root. Folders themselves are not listed.
std::vector<InputEntry> WalkInputTree(const std::filesystem::path& root, const WalkOptions& options = {});

/// Copies the symbolic link `from` (not what it points to) to `to`, atomically: a link with the
/// same target text.
Status CopySymlinkAtomic(const std::filesystem::path& from, const std::filesystem::path& to);

// ---- outputs ---------------------------------------------------------------------------------

/// The hidden file every output folder portkit creates carries; its first line names the command.
inline constexpr std::string_view kOutputMarker = ".portkit-output";

/// Whether `folder` holds kOutputMarker.
bool IsMarkedOutput(const std::filesystem::path& folder);

/// The command named in `folder`'s marker ("" when there is none).
std::string MarkedOutputCommand(const std::filesystem::path& folder);

/// Writes the marker into `folder`: `command` on the first line, then `files` (relative paths,
/// one a line), so a later run of the same command knows what it wrote.
Status MarkOutput(const std::filesystem::path& folder, std::string_view command,
                  const std::vector<std::string>& files = {});

/// The files listed in `folder`'s marker, keeping only relative paths that stay inside the folder.
std::vector<std::string> MarkedOutputFiles(const std::filesystem::path& folder);

/// Marks `folder` as being written by `command` in this process, before its first file
/// (docs/safety.md, Crash markers): the marker's first line is `portkit COMMAND<TAB>in progress:
/// pid N`, then `files`. A run that is killed leaves it, so the next run knows the folder as its
/// command's own (no --force needed) and as unfinished. MarkOutput replaces it when the run ends.
Status MarkOutputStarted(const std::filesystem::path& folder, std::string_view command,
                         const std::vector<std::string>& files = {});

/// What `folder`'s marker says.
struct OutputMarker {
  std::string command;   ///< "" when the folder carries no marker
  bool finished = true;  ///< false: written by MarkOutputStarted and not replaced since
  long pid = 0;          ///< the process of an unfinished run
  /// That process is alive and is a portkit (its name is this program's): another run is writing
  /// the folder now. False for a run that was killed, or whose pid now names another program.
  bool running = false;
  std::vector<std::string> files;  ///< as MarkedOutputFiles
};
OutputMarker ReadOutputMarker(const std::filesystem::path& folder);

/// One path component made from input data (a tensor key, an operator name): '/', '\\', NUL and
/// control characters become '_', a leading '.' becomes '_' (no "..", no hidden files), an empty
/// name becomes "_", and the result is at most 200 bytes (cut on a UTF-8 boundary). Never
/// contains a folder separator, so `out / SafeFileName(x)` stays inside `out`.
std::string SafeFileName(std::string_view name);

/// Whether `rel` (a relative path from input data) stays inside its folder: not absolute, no
/// ".." component, no empty name.
bool IsContainedRelativePath(std::string_view rel);

// ---- room for a copy ------------------------------------------------------------------------

/// What a copy of some files will write, measured before anything is written.
struct CopySize {
  uint64_t bytes = 0;  ///< the sum of their apparent sizes (what the copy writes)
  /// Sparse files among them ("NAME: a sparse file: N MB long, M MB on disk"): copying one writes
  /// its full length.
  std::vector<std::string> sparse;
};

/// Adds up the apparent sizes (stat's st_size, a hole counted in full) of `files`; files that
/// cannot be stat'ed count 0 (copying them reports the error).
CopySize MeasureCopy(const std::vector<std::filesystem::path>& files);

/// The bytes free to this user on the file system holding `dir` (or its nearest existing
/// parent), from statvfs (f_bavail * f_frsize). A test hook: the environment variable
/// PORTKIT_TEST_FREE_BYTES, when set to a number, replaces the measured figure (tests fake a
/// full disk with it; docs/safety.md).
Expected<uint64_t> FreeBytes(const std::filesystem::path& dir);

/// kIo "not enough free space: `what` writes N MB (B bytes) into DIR, which has M MB (F bytes)
/// free; ..." when `bytes` (plus 1 MiB of slack for folders and reports) do not fit in the free
/// space of `dir`'s file system. Checked before a project is copied (migrate, the
/// dynamic-shape copy), so that no copy stops half-way on a full disk.
Status CheckFreeSpace(const std::filesystem::path& dir, uint64_t bytes, std::string_view what);

// ---- code run in this process ----------------------------------------------------------------

/// Whether a folder may hold code this process will load (dlopen): it is a folder (not a link),
/// owned by this user or by root, and nobody else can write it (no group/other write bit, unless
/// the sticky bit is set, as on /tmp). Otherwise kInvalidArgument naming the folder, its owner
/// and mode, and what to do.
Status CheckPrivateFolder(const std::filesystem::path& dir, std::string_view what);

/// Opens a file whose code this process will load, with the same rule as CheckPrivateFolder for
/// the file itself (a regular file, not a link, owned by this user or root, not writable by group
/// or others). Load it through "/proc/self/fd/N" (ProcFdPath) so that what was checked is what
/// is loaded, even if the name is replaced meanwhile.
Expected<UniqueFd> OpenPrivateCode(const std::filesystem::path& file);

/// "/proc/self/fd/N".
std::string ProcFdPath(int fd);

// ---- generated code --------------------------------------------------------------------------

/// A Python string literal (with its quotes) whose value is `text`, as repr() would write it:
/// quotes, backslashes, newlines and every control character escaped; non-ASCII UTF-8 kept;
/// invalid UTF-8 bytes as \x escapes of a bytes-decoded surrogate are not representable, so they
/// are written as U+FFFD.
std::string PythonStringLiteral(std::string_view text);

/// A POSIX shell word (single-quoted unless it is made of safe characters only) whose value is
/// `text`.
std::string ShellQuote(std::string_view text);

}  // namespace portkit
