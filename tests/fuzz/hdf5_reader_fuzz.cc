// Fuzz target for the HDF5 dump reader (`convert` and `extract` of .h5 dumps): the bytes are
// written as an .h5 file, listed (`/op_name/seqid/...`) and every tensor read in pieces, the way
// `portkit convert` does it: inside RunIsolated, because the HDF5 library itself can crash on a
// corrupt file. What is checked is portkit's contract: whatever the bytes, the call comes back
// with a result or a Status, and a crash of the library is reported as a corrupt file naming it.
// (The child's coverage is not seen by libFuzzer, so this target mutates blindly; its value is
// the contract, run on every seed and mutant.)
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "accuracy/hdf5_dump.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  namespace fs = std::filesystem;
  static const fs::path dir = fs::temp_directory_path() / ("portkit_hdf5_fuzz_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "dump.h5";
  if (FILE* f = std::fopen(file.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  if (!portkit::accuracy::HasHdf5Signature(file)) return 0;
  auto run = portkit::accuracy::RunIsolated(file, {dir}, [&](int) {
    auto h5 = portkit::accuracy::Hdf5File::Open(file);
    if (!h5.ok()) return 1;
    auto listing = h5->List();
    if (!listing.ok()) return 1;
    uint64_t seen = 0;
    for (const auto& t : listing->tensors) {
      if (t.numel() > (1u << 20)) continue;
      portkit::Status st = h5->Read(t, 4096, [&](const uint8_t*, size_t count) {
        seen += count;
        return portkit::Status::Ok();
      });
      (void)st;
    }
    return seen > 0 ? 0 : 1;
  });
  // A crash of the library comes back as a Status naming the file, never as a crash here.
  if (!run.ok() && run.status().message().find(file.string()) == std::string::npos) __builtin_trap();
  return 0;
}
