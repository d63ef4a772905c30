#pragma once
/// Engine-internal: the state one analysis run hands its mode's `prepare` and `run` steps
/// (AnalyseModeInfo), and the steps of each mode.
#include <filesystem>
#include <memory>
#include <string>

#include "analyse/affinity.h"
#include "analyse/api.h"
#include "analyse/project_loader.h"
#include "analyse/target.h"
#include "analyse/third_party.h"
#include "core/thread_pool.h"

namespace portkit::analyse {

struct ModeRun {
  const AnalyseOptions& options;
  Context& ctx;
  const Target& target;
  const ThirdPartyApis* third_party = nullptr;  ///< -api files, when given
  std::unique_ptr<AffinityTable> affinity;      ///< loaded by affinity_apis' prepare
  std::filesystem::path detector_dir;           ///< dynamic_shape: the detector's sources
  LoadedProject* project = nullptr;             ///< set before `run`
  ThreadPool* pool = nullptr;
  AnalyseReport& report;
};

Status PrepareAffinityMode(ModeRun& run);
Status PrepareDynamicShapeMode(ModeRun& run);
Status RunTorchApisMode(ModeRun& run);
Status RunThirdPartyMode(ModeRun& run);
Status RunAffinityMode(ModeRun& run);
/// Writes the instrumented copy (src/analyse/dynamic_shape.cc).
Status RunDynamicShapeMode(ModeRun& run);

}  // namespace portkit::analyse
