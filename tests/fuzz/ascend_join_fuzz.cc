// libFuzzer target for a torch_npu profile folder (ASCEND_PROFILER_OUTPUT/): trace_view.json and
// kernel_details.csv imported side by side into one store (in memory) by their importers, then
// joined (src/prof/ascend_join.cc: each kernel_details row to its trace_view task, the duplicate
// dropped). The input is the two files cut at "\n----8<----\n" (fuzz_split.h). Any input must end
// in a store or a Status naming a file, never a crash.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_split.h"
#include "prof/ascend_join.h"
#include "prof/importers/importer.h"
#include "prof/store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  const std::filesystem::path root = portkit::fuzz::FreshFolder("ascend_join_fuzz");
  const std::filesystem::path dir = root / "ASCEND_PROFILER_OUTPUT";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  auto pieces = portkit::fuzz::SplitPieces(data, size, 2);
  if (pieces.size() < 2) pieces.push_back(pieces[0]);  // the same bytes as both files
  const std::pair<const char*, const char*> files[] = {{"trace_view.json", "ascend_pt"},
                                                       {"kernel_details.csv", "kernel_details"}};
  auto store = portkit::prof::Store::Open(":memory:");
  if (!store.ok()) return 0;
  static const auto importers = portkit::prof::MakeImporters();
  std::vector<std::pair<std::string, std::string>> imported;
  for (size_t i = 0; i < 2; ++i) {
    const std::filesystem::path file = dir / files[i].first;
    if (!portkit::fuzz::WriteBytes(file, pieces[i])) return 0;
    const std::string display = std::string("ASCEND_PROFILER_OUTPUT/") + files[i].first;
    for (const auto& importer : importers) {
      if (importer->name() != files[i].second) continue;
      auto result = importer->Import(file, display, *store, portkit::prof::ImportLimits{});
      if (result.ok()) imported.emplace_back(display, std::string(importer->name()));
    }
  }
  auto joins = portkit::prof::JoinAscendSiblings(*store, imported);
  (void)joins;
  return 0;
}
