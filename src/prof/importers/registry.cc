#include <zlib.h>

#include "core/input_files.h"

#include "prof/importers/importer.h"

namespace portkit::prof {

std::vector<std::unique_ptr<Importer>> MakeImporters() {
  std::vector<std::unique_ptr<Importer>> importers;
  // Asked in this order: the bare-array forms are told apart before the generic legacy one.
  importers.push_back(MakeTorchNpuTraceImporter());
  importers.push_back(MakeKinetoTraceImporter());
  importers.push_back(MakeLegacyTraceImporter());
  importers.push_back(MakeKernelDetailsImporter());
  return importers;
}

std::string ReadFirstBytes(const std::filesystem::path& path, size_t max_bytes) {
  // zlib reads plain files as they are and gzip files decompressed.
  // A FIFO or device is never opened for reading (docs/safety.md): it is not a trace.
  auto fd = OpenInputFile(path);
  if (!fd.ok()) return {};
  gzFile f = gzdopen(fd->release(), "rb");
  if (!f) return {};
  std::string out(max_bytes, '\0');
  int n = gzread(f, out.data(), static_cast<unsigned>(max_bytes));
  gzclose(f);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

const Importer* DetectImporter(const std::vector<std::unique_ptr<Importer>>& importers, std::string_view first_bytes) {
  if (first_bytes.empty()) return nullptr;
  for (const auto& importer : importers)
    if (importer->Sniff(first_bytes)) return importer.get();
  return nullptr;
}

std::string DescribeImporters(const std::vector<std::unique_ptr<Importer>>& importers) {
  std::string out;
  for (const auto& importer : importers) out += (out.empty() ? "" : ", ") + std::string(importer->description());
  return out;
}

}  // namespace portkit::prof
