// libFuzzer target for the inputs of `portkit tune`: the op list, a landscape file and a bank
// export, each parsed from the same bytes. Any input must end in a value or a Status, never a
// crash; a parsed op list must also survive signature and JSON round trip.
#include <cstdint>
#include <string>
#include <string_view>

#include "tune/knowledge_base.h"
#include "tune/landscape.h"
#include "tune/op_desc.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto list = portkit::tune::ParseOpList(text, "fuzz.json");
  if (list.ok()) {
    for (const auto& op : list->ops) {
      std::string reason;
      auto back = portkit::tune::ParseOpJson(portkit::tune::OpToJson(op), "roundtrip", &reason);
      if (!back.ok() || portkit::tune::Signature(*back) != portkit::tune::Signature(op)) __builtin_trap();
    }
  }
  auto landscape = portkit::tune::ParseLandscape(text, "fuzz.jsonl");
  if (landscape.ok()) (void)landscape->ToJsonLines();
  auto entries = portkit::tune::EntriesFromJson(text, "bank.json");
  (void)entries;
  return 0;
}
