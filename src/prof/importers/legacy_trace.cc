/// The legacy (autograd) torch profiler's export_chrome_trace output, as torch builds without
/// Kineto write it (Debian's 1.13): a bare event array, CPU ops without a category.
#include "prof/importers/chrome_trace.h"
#include "prof/importers/importer.h"

namespace portkit::prof {
namespace {

class LegacyTraceImporter final : public Importer {
 public:
  std::string_view name() const override { return "legacy"; }
  std::string_view description() const override { return "legacy torch profiler JSON"; }
  bool Sniff(std::string_view first_bytes) const override { return LooksLikeEventArray(first_bytes); }
  Expected<ImportResult> Import(const std::filesystem::path& path, const std::string& display, Store& store,
                                const ImportLimits& limits) const override {
    return ImportChromeTrace(path, display, "legacy", store, limits);
  }
};

}  // namespace

std::unique_ptr<Importer> MakeLegacyTraceImporter() { return std::make_unique<LegacyTraceImporter>(); }

}  // namespace portkit::prof
