// libFuzzer target for prof cluster's input (src/prof/cluster): a folder of per-rank traces (Kineto
// JSON or torch_npu trace_view.json), found by content, each read, reduced to its digest and
// analysed across ranks (slow ranks, communication, step trace) and merged into one timeline. The
// input is up to four rank files cut at "\n----8<----\n" (fuzz_split.h). Any input must end in a
// report or a Status naming a file, never a crash.
#include <cstdint>
#include <string>

#include "core/context.h"
#include "core/log.h"
#include "fuzz_split.h"
#include "prof/cluster/cluster.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  const std::filesystem::path dir = portkit::fuzz::FreshFolder("cluster_fuzz");
  auto pieces = portkit::fuzz::SplitPieces(data, size, 4);
  for (size_t i = 0; i < pieces.size(); ++i)
    // Ranks from the file names, unless a trace says otherwise (distributedInfo.rank).
    if (!portkit::fuzz::WriteBytes(dir / ("worker_rank-" + std::to_string(i) + ".json"), pieces[i])) return 0;
  static portkit::Logger logger(nullptr, portkit::SystemClock());
  portkit::Context ctx{logger, portkit::SystemClock(), ""};
  ctx.jobs = 1;
  namespace cluster = portkit::prof::cluster;
  cluster::ClusterOptions options;
  options.dir = dir;
  options.timeline = true;
  options.include_last_step = size % 2 == 1;
  auto report = cluster::RunCluster(options, ctx);
  (void)report;
  return 0;
}
