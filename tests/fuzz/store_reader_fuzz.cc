// libFuzzer target for the SQLite files portkit reads that someone else may have written or edited
// (docs/safety.md, "SQLite inputs"): the bytes become a file that is read as a profile store
// (`portkit.db`: the schema check, the rows out of range hidden, then every reading query of
// `prof export summary`, `export timeline`, `diff`, `prof query` and of tune's operator list) and
// as a tuning bank (`tune_bank.db`: the schema check, then `bank list`). String limits are small
// here (4 KiB) so that the over-the-limit paths are reached by inputs under 1 MiB. Any input must
// end in a value or a Status naming the file, never a crash or a hang.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_split.h"
#include "prof/api.h"
#include "prof/diff.h"
#include "prof/exporters/summary.h"
#include "prof/exporters/timeline.h"
#include "prof/store.h"
#include "tune/knowledge_base.h"
#include "tune/prof_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  const std::filesystem::path dir = portkit::fuzz::FreshFolder("store_reader_fuzz");
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  constexpr int64_t kSmallLimit = 4096;

  const std::filesystem::path store_path = dir / "portkit.db";
  if (!portkit::fuzz::WriteBytes(store_path, bytes)) return 0;
  {
    portkit::prof::StoreReadOptions read;
    read.max_value_bytes = kSmallLimit;
    auto store = portkit::prof::Store::OpenForReading(store_path, read);
    if (store.ok()) {
      (void)store->read_notes().Warning(store_path.string());
      (void)portkit::prof::BuildSummaries(*store);
      portkit::prof::TimelineStats stats;
      (void)portkit::prof::BuildTimeline(*store, &stats);
      (void)portkit::prof::ComputeTotals(*store);
    }
  }
  (void)portkit::tune::OpsFromProfile(dir);
  {
    // The query API (prof query, portkit.prof.load): every event with its args, and the
    // communication kernels' collective arguments parsed from them.
    portkit::prof::QueryOptions options;
    options.dir = dir;
    options.max_string_bytes = kSmallLimit;
    auto query = portkit::prof::OpenProfile(options);
    if (query.ok()) {
      portkit::prof::EventFilter all;
      all.with_args = true;
      all.name_regex = "a";
      (void)query->ForEachEvent(all, [](const portkit::prof::EventRow&) { return portkit::Status::Ok(); });
      (void)query->Comm();
    }
  }

  const std::filesystem::path bank_path = dir / "tune_bank.db";
  if (!portkit::fuzz::WriteBytes(bank_path, bytes)) return 0;
  {
    auto bank = portkit::tune::KnowledgeBase::Open(bank_path, portkit::tune::BankAccess::kReadOnly, kSmallLimit);
    if (bank.ok()) {
      std::vector<std::string> left_out;
      (void)bank->List(&left_out);
    }
  }
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    std::filesystem::remove(store_path.string() + suffix, ec);
    std::filesystem::remove(bank_path.string() + suffix, ec);
  }
  return 0;
}
