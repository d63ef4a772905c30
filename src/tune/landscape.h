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
  /// killed run keeps what it measured; fails now when a file cannot be created there. An
  /// existing landscape is kept: at the first record, when it was recorded with the same
  /// validators and --fix, its operators and points are taken into this landscape and the new
  /// lines are appended to it (the file then holds the union, which replay reads); otherwise
  /// (another machine, toolchain or --fix, or not a landscape) the records go to a new numbered
  /// file beside it, `NAME.1.jsonl`, `NAME.2.jsonl`, ... Nothing is touched before the first record.
  Status StreamTo(const std::filesystem::path& path);
  /// Closes the stream (the file then holds what was recorded, in recording order).
  void CloseStream() { stream_.reset(); }
  /// The file the records went to ("" before the first record).
  const std::filesystem::path& streamed_file() const { return stream_file_; }
  /// Not empty once a record could not be written (disk full, file too large): the message.
  const std::string& stream_error() const { return stream_error_; }

 private:
  void Append(const std::string& line);
  bool OpenStream();
  std::filesystem::path stream_path_;  // asked for
  std::filesystem::path stream_file_;  // written
  std::shared_ptr<FILE> stream_;
  std::string stream_error_;
};

/// Reads a landscape file's text; errors name the file and line.
Expected<Landscape> ParseLandscape(std::string_view text, std::string_view file);

}  // namespace portkit::tune
