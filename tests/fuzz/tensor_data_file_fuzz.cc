// libFuzzer target for msprobe's one-file-per-tensor data as compare reads it
// (src/accuracy/tensor_data_file.h, torch_pickle.h, zip_directory.h): the input is read three ways,
// (1) as a file (a torch.save zip archive, a .npy file, or anything else), (2) as a data.pkl pickle
// alone, (3) as the data.pkl of an otherwise valid torch.save archive whose storage holds 256 bytes,
// so mutated pickles reach the checks of shape, offset and strides. Any input must end in a tensor
// or a Status naming the file, never a crash, a read out of bounds or a run of pickled code; a
// tensor that opens is read in full (gathered when strided), in pieces.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "accuracy/tensor_data_file.h"
#include "accuracy/torch_pickle.h"
#include "fuzz_split.h"

namespace {

void Put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

/// A stored zip archive of `entries` (name, data), as torch.save lays it out.
std::string Zip(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out, dir;
  for (const auto& [name, data] : entries) {
    const uint64_t local = out.size();
    Put(out, 0x04034b50, 4), Put(out, 20, 2), Put(out, 0, 2), Put(out, 0, 2), Put(out, 0, 4), Put(out, 0, 4);
    Put(out, data.size(), 4), Put(out, data.size(), 4), Put(out, name.size(), 2), Put(out, 0, 2);
    out += name + data;
    Put(dir, 0x02014b50, 4), Put(dir, 20, 2), Put(dir, 20, 2), Put(dir, 0, 2), Put(dir, 0, 2), Put(dir, 0, 4);
    Put(dir, 0, 4), Put(dir, data.size(), 4), Put(dir, data.size(), 4), Put(dir, name.size(), 2), Put(dir, 0, 2);
    Put(dir, 0, 2), Put(dir, 0, 2), Put(dir, 0, 2), Put(dir, 0, 4), Put(dir, local, 4);
    dir += name;
  }
  const uint64_t dir_at = out.size();
  out += dir;
  Put(out, 0x06054b50, 4), Put(out, 0, 4), Put(out, entries.size(), 2), Put(out, entries.size(), 2);
  Put(out, dir.size(), 4), Put(out, dir_at, 4), Put(out, 0, 2);
  return out;
}

/// Opens `file` and reads every element of its tensor, 64 at a time (at most 2^16 of them);
/// `limits` cap views that read storage elements more than once.
size_t ReadAll(const std::filesystem::path& file, const portkit::accuracy::TensorLimits& limits = {}) {
  auto f = portkit::accuracy::TensorDataFile::Open(file, limits);
  if (!f.ok()) return f.status().message().size();
  const portkit::accuracy::TensorInfo* t = f->Find("");
  if (!t || portkit::accuracy::DTypeSize(t->dtype) == 0) return 0;
  std::vector<uint8_t> scratch;
  std::vector<double> out(64);
  size_t seen = 0;
  const uint64_t numel = std::min<uint64_t>(t->numel(), 1 << 16);
  for (uint64_t at = 0; at < numel; at += out.size()) {
    const size_t c = static_cast<size_t>(std::min<uint64_t>(out.size(), numel - at));
    portkit::accuracy::DecodeToDouble(t->dtype, f->Elements(*t, at, c, scratch), c, out.data());
    seen += c;
  }
  f->Release(*t, 0, numel);
  return seen;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::filesystem::path dir = portkit::fuzz::FreshFolder("tensor_data_fuzz");
  size_t seen = 0;
  if (portkit::fuzz::WriteBytes(dir / "t.pt", bytes)) seen += ReadAll(dir / "t.pt");
  auto pickled = portkit::accuracy::ReadPickledTensor(bytes, "data.pkl");
  if (pickled.ok()) seen += pickled->shape.size() + pickled->strides.size();
  const std::string archive = Zip({{"archive/data.pkl", std::string(bytes)},
                                   {"archive/byteorder", "little"},
                                   {"archive/data/0", std::string(256, '\x3c')}});
  if (portkit::fuzz::WriteBytes(dir / "a.pt", archive)) {
    seen += ReadAll(dir / "a.pt");
    seen += ReadAll(dir / "a.pt", portkit::accuracy::TensorLimits{64});  // stride-0 / overlapping views refused
  }
  return seen == static_cast<size_t>(-1) ? 1 : 0;
}
