/// Kineto traces as torch.profiler writes them on torch 2.x (CUDA, ROCm, CPU, Triton):
/// `{"schemaVersion": 1, "deviceProperties": [...], "traceEvents": [...]}`, plain or gzip.
#include "prof/importers/chrome_trace.h"
#include "prof/importers/importer.h"

namespace portkit::prof {
namespace {

class KinetoTraceImporter final : public Importer {
 public:
  std::string_view name() const override { return "kineto"; }
  std::string_view description() const override { return "Kineto JSON (*.json, *.json.gz)"; }
  bool Sniff(std::string_view first_bytes) const override { return LooksLikeTraceObject(first_bytes); }
  Expected<ImportResult> Import(const std::filesystem::path& path, const std::string& display, Store& store,
                                const ImportLimits& limits) const override {
    return ImportChromeTrace(path, display, "kineto", store, limits);
  }
};

}  // namespace

std::unique_ptr<Importer> MakeKinetoTraceImporter() { return std::make_unique<KinetoTraceImporter>(); }

}  // namespace portkit::prof
