// libFuzzer target for msprobe dumps as compare input (src/accuracy/msprobe_dump.cc): the input is
// a dump.json (statistics, md5 or tensor mode) in a stepN/rankR folder, read as a stream one call
// at a time (MsprobeDumpReader), under the default cap on one call and under a cap of 256 bytes
// (so the "over the limit" path is reached at any point of the stream). Any input must end in a
// Dump or a Status naming the file, never a crash; a dump that loads is walked in full.
#include <cstdint>
#include <string>
#include <string_view>

#include "accuracy/msprobe_dump.h"
#include "fuzz_split.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  const std::filesystem::path dir = portkit::fuzz::FreshFolder("msprobe_fuzz") / "step0" / "rank0";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!portkit::fuzz::WriteBytes(dir / "dump.json", std::string_view(reinterpret_cast<const char*>(data), size)))
    return 0;
  if (!portkit::accuracy::IsMsprobeDump(dir)) return 0;
  auto capped = portkit::accuracy::LoadMsprobeDump(dir, 256);
  if (!capped.ok() && capped.status().message().find("dump.json") == std::string::npos) __builtin_trap();
  auto dump = portkit::accuracy::LoadMsprobeDump(dir);
  if (!dump.ok()) {
    // Every error names the file.
    if (dump.status().message().find("dump.json") == std::string::npos) __builtin_trap();
    return 0;
  }
  size_t seen = 0;
  for (const auto& op : dump->ops)
    for (const auto& t : op.tensors) seen += t.NonFinite() + t.shape.size() + t.key.size();
  return seen == static_cast<size_t>(-1) ? 1 : 0;
}
