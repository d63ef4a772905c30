#pragma once
/// `portkit analyse`: migration analysis of a PyTorch project (seed 001).
#include <string>
#include <vector>

#include "core/context.h"

namespace portkit::analyse {

struct AnalyseOptions {
  std::string input;
  std::string output;
  std::string version;  ///< torch version of the analysed code; empty = newest list
  std::string mode = "torch_apis";
  std::string target;  ///< a name under data/targets or a folder with a target.json; empty = default
  std::vector<std::string> env_paths;
  std::vector<std::string> api_files;  ///< -api: results of earlier third_party runs
  std::vector<std::string> formats = {"csv", "json"};
  size_t max_file_bytes = 64u << 20;
};

/// Runs the analysis; returns the process exit code (0 ok, 2 bad input or output folder).
int RunAnalyse(const AnalyseOptions& options, Context& ctx);

/// CLI entry: parses argv (seed spellings -i -o -v -m -env accepted) and runs.
int AnalyseMain(int argc, char** argv, Context& ctx);

}  // namespace portkit::analyse
