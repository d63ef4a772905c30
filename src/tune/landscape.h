#pragma once
/// The landscape: every candidate measured in a run (operator, configuration, outcome, time),
/// written as JSON lines so that `portkit tune --replay FILE` can run any strategy on it again
/// without compiling or measuring. Line kinds: one "landscape" header, one "op" per operator,
/// one "eval" per measured configuration.
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tune/op_desc.h"

namespace portkit::tune {

struct LandscapePoint {
  std::string status;  ///< MeasureStatusName, or "compile_error"
  double time_us = 0;  ///< median per call when status is "ok"
};

struct Landscape {
  std::string validators;
  std::vector<std::string> fixes;  ///< the --fix restrictions of the recording (replay applies them)
  std::vector<OpDesc> ops;
  /// signature -> configuration key -> outcome (the last record wins)
  std::map<std::string, std::map<std::string, LandscapePoint>> points;

  std::string file;  ///< the file it was read from ("" when recorded), named in errors

  void AddOp(const OpDesc& op);
  void Add(const std::string& signature, const std::string& key, const LandscapePoint& p);
  /// JSON lines, ops in insertion order, points sorted by key.
  std::string ToJsonLines() const;
  /// From now on every AddOp / Add is also appended to `path` as one flushed line, so that a
  /// killed run keeps what it measured. The file is created (truncated) at the first record, after
  /// the header line (validators, fix); fails now when a file cannot be created there.
  Status StreamTo(const std::filesystem::path& path);
  /// Closes the stream (the file then holds what was recorded, in recording order).
  void CloseStream() {
    stream_.reset();
    stream_path_.clear();
  }

 private:
  void Append(const std::string& line);
  std::filesystem::path stream_path_;
  std::shared_ptr<FILE> stream_;
  bool header_written_ = false;
};

/// Reads a landscape file's text; errors name the file and line.
Expected<Landscape> ParseLandscape(std::string_view text, std::string_view file);

}  // namespace portkit::tune
