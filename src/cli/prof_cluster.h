#pragma once
/// `portkit prof cluster`: registered by `portkit prof` (src/cli/prof.cc) as one subcommand.
#include <string>
#include <vector>

#include "cli/cli_common.h"

namespace portkit::cli {

struct ClusterCommand {
  CLI::App* command = nullptr;
  std::string dir, output;
  std::string target;  ///< --target: whose profile.communication_kernels mark communication
  std::vector<std::string> formats;
  bool no_timeline = false, include_last_step = false;
  bool force = false;  ///< replace report files in a named -o that portkit did not write
  int jobs = 0;        ///< threads reading ranks (0: one per core)

  /// Adds `cluster` and its options to `prof` (`ctx`: the data folders --target chooses from).
  void Register(CLI::App& prof, const Context& ctx);
  bool parsed() const { return command && command->parsed(); }
  /// Validates the paths, runs the analysis and writes the reports; the exit code.
  int Run(Context& ctx) const;
};

}  // namespace portkit::cli
