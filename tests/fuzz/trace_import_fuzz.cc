// libFuzzer target for the trace importers: sniffing (which importer claims the bytes), the
// streaming JSON splitter, the per-event parser, the kernel_details CSV reader and the store (in
// memory); and prof cluster's reader of one rank, its reduction, the digest's byte form (written
// and read back, and the input itself read as digest bytes) and the communication analysis.
// Any input must end in a result or a Status, never a crash.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "prof/cluster/cluster.h"
#include "prof/importers/chrome_trace.h"
#include "prof/importers/importer.h"
#include "prof/store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  static const std::string path = "/tmp/portkit_trace_fuzz_" + std::to_string(getpid()) + ".json";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto store = portkit::prof::Store::Open(":memory:");
  if (!store.ok()) return 0;
  static const auto importers = portkit::prof::MakeImporters();
  const auto* importer = portkit::prof::DetectImporter(importers, portkit::prof::ReadFirstBytes(path));
  // Claimed or not, the JSON reader must survive the bytes.
  auto result = importer ? importer->Import(path, "fuzz.json", *store, portkit::prof::ImportLimits{})
                         : portkit::prof::ImportChromeTrace(path, "fuzz.json", "kineto", *store);
  (void)result;

  namespace cluster = portkit::prof::cluster;
  std::vector<cluster::RankDigest> digests;
  digests.push_back(cluster::DigestRank(0, cluster::ReadRankTrace(path, "fuzz.json", 0)));
  std::vector<cluster::RankDigest> back;
  if (cluster::DeserializeDigests(cluster::SerializeDigests(digests), &back).ok() && back.size() == 1 &&
      back[0].status.ok()) {
    std::vector<cluster::RankTrace> ranks{back[0].trace, back[0].trace};
    ranks[1].rank = 1;
    (void)cluster::AnalyseCommunication(ranks);
  }
  std::vector<cluster::RankDigest> junk;
  (void)cluster::DeserializeDigests(std::string_view(reinterpret_cast<const char*>(data), size), &junk);
  for (const auto& d : junk)
    if (d.status.ok()) {
      std::vector<cluster::RankTrace> ranks{d.trace};
      (void)cluster::AnalyseCommunication(ranks);
    }
  return 0;
}
