// libFuzzer target for the tensor-file readers: safetensors headers that lie about sizes and
// offsets, truncated files, dump manifests and end-of-dump markers. Every input ends in a value or a Status.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "accuracy/dump.h"
#include "accuracy/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  static const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("portkit_tensor_fuzz_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / "op_000000.safetensors";
  if (FILE* f = std::fopen(file.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  auto st = portkit::accuracy::SafetensorsFile::Open(file);
  if (st.ok()) {
    std::vector<double> out(256);
    for (const auto& [name, t] : st->tensors()) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(t.numel(), out.size()));
      portkit::accuracy::DecodeToDouble(t.dtype, st->Data(t), n, out.data());
    }
  }
  // The same bytes as a manifest.
  if (FILE* f = std::fopen((dir / "manifest.jsonl").c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  auto dump = portkit::accuracy::Dump::Load(dir);
  (void)dump;
  // And as the end-of-dump marker beside a valid one-line manifest.
  if (FILE* f = std::fopen((dir / "manifest.jsonl").c_str(), "wb")) {
    std::fputs("{\"index\": 0, \"name\": \"aten::add\", \"kind\": \"op\", \"phase\": \"forward\", \"tensors\": []}\n",
               f);
    std::fclose(f);
  }
  if (FILE* f = std::fopen((dir / "dump_complete.json").c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  auto marked = portkit::accuracy::Dump::Load(dir);
  (void)marked;
  std::filesystem::remove(dir / "dump_complete.json");
  return 0;
}
