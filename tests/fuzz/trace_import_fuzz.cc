// libFuzzer target for the trace importers: sniffing (which importer claims the bytes), the
// streaming JSON splitter, the per-event parser, the kernel_details CSV reader and the store (in
// memory). Any input must end in a result or a Status, never a crash.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

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
  return 0;
}
