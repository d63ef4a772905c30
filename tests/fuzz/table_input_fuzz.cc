// libFuzzer target for the CSV inputs: the third-party results given to `analyse --api-files`
// (ReadCsvFile, ThirdPartyApis::Load) and the streaming reader of `kernel_details.csv`
// (CsvStreamParser). Besides "never a crash", it checks that the streamed parse agrees with the
// whole-text parse however the bytes are cut into pieces (a quote pair or CRLF split between two
// reads must not change a field), and that the record cap holds.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "analyse/third_party.h"
#include "core/csv_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto whole = portkit::ParseCsv(text, "fuzz.csv");

  // The same bytes streamed in pieces of 1, 2, 3, ... bytes (cycling), so every boundary is seen.
  portkit::CsvRows streamed;
  portkit::CsvStreamParser parser("fuzz.csv");
  auto keep = [&](std::vector<std::string>& r) {
    streamed.push_back(std::move(r));
    return portkit::Status::Ok();
  };
  portkit::Status st = portkit::Status::Ok();
  size_t piece = 1;
  for (size_t at = 0; at < text.size() && st.ok(); at += piece, piece = piece % 7 + 1)
    st = parser.Feed(text.substr(at, piece), keep);
  if (st.ok()) st = parser.Finish(keep);
  if (whole.ok() != st.ok()) __builtin_trap();
  if (whole.ok() && *whole != streamed) __builtin_trap();
  if (!whole.ok() && whole.status().message() != st.message()) __builtin_trap();

  // A record cap of 64 bytes: no delivered record may exceed it.
  portkit::CsvStreamParser capped("fuzz.csv", 64);
  auto bounded = [&](std::vector<std::string>& r) {
    size_t n = 0;
    for (const auto& f : r) n += f.size() + 1;
    if (n > 64 + r.size() + 1) __builtin_trap();
    return portkit::Status::Ok();
  };
  if (capped.Feed(text, bounded).ok()) (void)capped.Finish(bounded);

  // The file reader and the --api-files loader on the same bytes.
  static const std::string path = "/tmp/portkit_table_fuzz_" + std::to_string(getpid()) + ".csv";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
    auto apis = portkit::analyse::ThirdPartyApis::Load({path});
    (void)apis;
  }
  return 0;
}
