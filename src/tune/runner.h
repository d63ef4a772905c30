#pragma once
/// Runs candidates. Each measurement runs in a forked child process (portkit::RunForked; it
/// inherits the workload copy-on-write): the child loads the shared object, validates one output against the
/// reference, then times warm-up + repeats. A candidate that crashes, hangs or computes wrong
/// values is rejected with a reason; the tuner carries on.
#include <filesystem>
#include <string>
#include <vector>

#include "tune/operators/operator.h"

namespace portkit::tune {

struct MeasureOptions {
  int repeats = 7;             ///< timed repeats (>= 5); the median is reported
  double min_repeat_us = 500;  ///< calls are batched so that one repeat lasts at least this long
  int timeout_seconds = 60;    ///< the child (its process group) is killed after this
};

enum class MeasureStatus { kOk, kWrongResult, kCrashed, kTimeout, kLoadError };
const char* MeasureStatusName(MeasureStatus s);

struct Measurement {
  MeasureStatus status = MeasureStatus::kLoadError;
  double median_us = 0;  ///< per call
  std::vector<double> samples_us;
  std::string detail;  ///< why it was rejected
};

/// "" when every value of `out` is within the workload's tolerance of its fp64 reference
/// (|out - ref| <= atol + rtol * |ref|, NaN never is), else the first offending value.
std::string ValidateOutput(const std::vector<float>& out, const Workload& w);

/// Validates and times one candidate.
Measurement Measure(const std::filesystem::path& shared_object, const Workload& w, const MeasureOptions& o);

/// Times two validated candidates alternately (a, b, a, b, ...) in one child so that both see
/// the same machine state; used to confirm a new best against the incumbent.
std::pair<Measurement, Measurement> MeasureInterleaved(const std::filesystem::path& a, const std::filesystem::path& b,
                                                       const Workload& w, const MeasureOptions& o);

}  // namespace portkit::tune
