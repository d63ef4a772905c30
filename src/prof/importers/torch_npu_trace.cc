/// The Ascend PyTorch profiler's trace_view.json (ASCEND_PROFILER_OUTPUT/): a bare event array whose timestamps
/// are decimal strings ("1704161511420306.491"), plain or gzip.
#include "prof/importers/chrome_trace.h"
#include "prof/importers/importer.h"

namespace portkit::prof {
namespace {

class TorchNpuTraceImporter final : public Importer {
 public:
  std::string_view name() const override { return "ascend_pt"; }
  std::string_view description() const override { return "Ascend PyTorch profiler trace_view.json"; }
  bool Sniff(std::string_view first_bytes) const override {
    return LooksLikeEventArray(first_bytes) && HasStringTimestamp(first_bytes);
  }
  Expected<ImportResult> Import(const std::filesystem::path& path, const std::string& display, Store& store,
                                const ImportLimits& limits) const override {
    return ImportChromeTrace(path, display, "ascend_pt", store, limits);
  }
};

}  // namespace

std::unique_ptr<Importer> MakeTorchNpuTraceImporter() { return std::make_unique<TorchNpuTraceImporter>(); }

}  // namespace portkit::prof
