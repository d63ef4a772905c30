#pragma once
/// What every command's CLI layer shares: the exit-code table, argument parsing with the
/// compatibility spellings of the original tools (`-i -o -v -m -env -api -dir -out --job_type`),
/// `--format`, `-j`, and up-front checks of input and output paths. Engines never see argv,
/// stdout or exit codes; the command files in src/cli/ turn argv into an engine's options, call
/// it, render its report and map its Status to an exit code here.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/context.h"
#include "core/status.h"

namespace portkit::cli {

/// The exit codes, the same in every command (README, "Exit codes").
enum ExitCode : int {
  kExitOk = 0,            ///< done; findings, if any, are in the report
  kExitFindings = 1,      ///< done, and the findings gate the user asked for tripped
  kExitUsage = 2,         ///< bad usage or input: unknown option, bad value, missing / unreadable /
                          ///< corrupt input, output that cannot be written
  kExitRegression = 3,    ///< done, and the regression gate the user asked for tripped
  kExitFailure = 4,       ///< the run itself failed (a tool it needs broke, an internal error)
  kExitInconclusive = 5,  ///< done, but the regression gate the user asked for could not decide
};

/// The exit code for a failed Status (kExitOk for an ok one).
int ExitCodeFor(const Status& status);

/// Logs `status` as an error and returns its exit code.
int Fail(Context& ctx, const Status& status);

/// A compatibility spelling: `spelling` (exact, or `spelling=value`) is read as `canonical`.
struct Alias {
  std::string_view spelling;
  std::string_view canonical;
};

/// The spellings of the original tools shared by several commands: -env, -api, -dir, -out,
/// --job_type.
std::span<const Alias> CommonAliases();

/// Rewrites the aliases in argv (argv[0] kept) and parses. Returns the exit code to end with
/// (0 after --help, kExitUsage after a parse error, with CLI11's message on stderr), or nullopt
/// when the command should run.
std::optional<int> Parse(CLI::App& app, int argc, char** argv, std::span<const Alias> aliases = CommonAliases());

/// `--format a,b`: `*formats` gets the list (validated against `allowed`, no duplicates). The
/// default is `default_formats`.
CLI::Option* AddFormatOption(CLI::App& app, std::vector<std::string>* formats, std::vector<std::string> allowed,
                             std::vector<std::string> default_formats);
bool Wants(const std::vector<std::string>& formats, std::string_view format);

/// `-j,--jobs N`, N >= 1 (default: one per core).
CLI::Option* AddJobsOption(CLI::App& app, int* jobs);

enum class PathKind { kAny, kFile, kDirectory };
// Every check below refuses a path that is itself a symbolic link (RefuseSymlinkedPath,
// docs/safety.md "Links"); links in its parent folders are accepted.
/// An input that must exist (and be of `kind`): kNotFound / kInvalidArgument naming `option`.
/// A FIFO, socket or device is refused (kInvalidArgument) without being opened.
Status CheckInput(const std::filesystem::path& path, std::string_view option, PathKind kind = PathKind::kAny);
/// An output folder that exists as a writable folder or can be created (its nearest existing
/// ancestor is a writable folder). Nothing is created. kIo naming `option` otherwise.
Status CheckOutputFolder(const std::filesystem::path& path, std::string_view option);
/// An output file whose folder passes CheckOutputFolder and which is not itself a folder.
Status CheckOutputFile(const std::filesystem::path& path, std::string_view option);

/// Whether the regular file `path` starts with one of `heads` (a file a command knows as its own
/// output by its first bytes, e.g. one written before the ledger of core/output_policy.h existed).
bool StartsWithAny(const std::filesystem::path& path, const std::vector<std::string_view>& heads);

}  // namespace portkit::cli
