#pragma once
// Writes small dumps in the dumper's layout (manifest.jsonl + op_NNNNNN.safetensors) for tests:
// the manifest carries each tensor's statistics (max/min/mean/norm, nan/inf counts) computed
// from the data, as portkit.torch.dumper writes them.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "accuracy/api.h"
#include "accuracy/dtype.h"
#include "core/context.h"
#include "core/log.h"

namespace portkit::accuracy::testing {

struct TestTensor {
  std::string key;    ///< input.0, output.0, replay.output.0
  std::string dtype;  ///< safetensors name; others (complex64) are listed with a note, no data
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  std::string note;
};

struct TestOp {
  std::string name, phase = "forward";
  std::vector<TestTensor> tensors;
  bool stats_only = false;
  std::string replay;  ///< the manifest's replay object, verbatim JSON; empty: none
};

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

inline TestTensor F32(std::string key, const std::vector<float>& v, std::vector<int64_t> shape = {}) {
  if (shape.empty() && v.size() != 1) shape = {static_cast<int64_t>(v.size())};
  return {std::move(key), "F32", std::move(shape), Bytes(v), ""};
}
inline TestTensor I64(std::string key, const std::vector<int64_t>& v) {
  return {std::move(key), "I64", {static_cast<int64_t>(v.size())}, Bytes(v), ""};
}

inline std::string JsonNumber(double v) {
  if (std::isnan(v)) return "\"nan\"";
  if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

inline void WriteSafetensors(const std::filesystem::path& path, const std::vector<const TestTensor*>& tensors) {
  std::string header = "{";
  uint64_t offset = 0;
  for (const auto* t : tensors) {
    if (header.size() > 1) header += ",";
    header += "\"" + t->key + "\":{\"dtype\":\"" + t->dtype + "\",\"shape\":[";
    for (size_t i = 0; i < t->shape.size(); ++i) header += (i ? "," : "") + std::to_string(t->shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t->bytes.size()) + "]}";
    offset += t->bytes.size();
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::ofstream out(path, std::ios::binary);
  uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header;
  for (const auto* t : tensors)
    out.write(reinterpret_cast<const char*>(t->bytes.data()), static_cast<std::streamsize>(t->bytes.size()));
}

/// The manifest statistics of a tensor, as the dumper computes them (a nan makes max/min nan).
inline std::string StatsJson(const TestTensor& t) {
  DType d = ParseDType(t.dtype);
  size_t size = DTypeSize(d);
  if (size == 0 || t.bytes.empty()) return "";
  size_t n = t.bytes.size() / size;
  std::vector<double> v(n);
  DecodeToDouble(d, t.bytes.data(), n, v.data());
  double mx = -INFINITY, mn = INFINITY, sum = 0, sq = 0;
  int64_t nan = 0, inf = 0;
  for (double x : v) {
    if (std::isnan(x)) ++nan;
    if (std::isinf(x)) ++inf;
    mx = std::max(mx, x), mn = std::min(mn, x), sum += x, sq += x * x;
  }
  if (nan) mx = mn = NAN;
  return ", \"max\": " + JsonNumber(mx) + ", \"min\": " + JsonNumber(mn) +
         ", \"mean\": " + JsonNumber(sum / static_cast<double>(n)) + ", \"norm\": " + JsonNumber(std::sqrt(sq)) +
         ", \"nan\": " + std::to_string(nan) + ", \"inf\": " + std::to_string(inf);
}

inline void WriteDump(const std::filesystem::path& dir, const std::vector<TestOp>& ops) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream manifest(dir / "manifest.jsonl");
  for (size_t i = 0; i < ops.size(); ++i) {
    const TestOp& op = ops[i];
    std::vector<const TestTensor*> stored;
    std::string tensors;
    for (const auto& t : op.tensors) {
      if (!tensors.empty()) tensors += ", ";
      tensors += "{\"key\": \"" + t.key + "\", \"dtype\": \"" + t.dtype + "\", \"shape\": [";
      for (size_t k = 0; k < t.shape.size(); ++k) tensors += (k ? ", " : "") + std::to_string(t.shape[k]);
      tensors += "]";
      if (!t.note.empty()) {
        tensors += ", \"note\": \"" + t.note + "\"}";
        continue;
      }
      tensors += StatsJson(t) + "}";
      stored.push_back(&t);
    }
    char file[32];
    std::snprintf(file, sizeof file, "op_%06zu.safetensors", i);
    bool data = !op.stats_only && !stored.empty();
    if (data) WriteSafetensors(dir / file, stored);
    manifest << "{\"index\": " << i << ", \"name\": \"" << op.name << "\", \"kind\": \"op\", \"phase\": \"" << op.phase
             << "\", \"module\": \"Net\", \"stack\": \"train.py:" << i
             << "\", \"overflow\": false, \"file\": " << (data ? "\"" + std::string(file) + "\"" : std::string("null"))
             << ", \"tensors\": [" << tensors << "]" << (op.replay.empty() ? "" : ", \"replay\": " + op.replay)
             << "}\n";
  }
  // The end-of-dump marker, last, as the dumper writes it.
  std::ofstream(dir / "dump_complete.json") << "{\"records\": " << ops.size() << "}\n";
}

/// A test with a run Context (quiet logger, one thread) and a fresh temporary folder per test;
/// `CompareDumps` writes two dumps there and compares them in process.
class DumpTest : public ::testing::Test {
 protected:
  Logger logger_{nullptr, SystemClock()};
  Context ctx_{logger_, SystemClock(), PORTKIT_TEST_DATA_DIR, 1, true};
  std::filesystem::path tmp_;
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    tmp_ = std::filesystem::temp_directory_path() /
           ("portkit_" + std::string(info->test_suite_name()) + "_" + std::string(info->name()));
    std::filesystem::remove_all(tmp_);
  }
  void TearDown() override { std::filesystem::remove_all(tmp_); }

  CompareReport CompareDumps(const std::vector<TestOp>& ref, const std::vector<TestOp>& tgt,
                             MatchKey match = MatchKey::kNameAndShape, uint64_t budget = 0) {
    WriteDump(tmp_ / "ref", ref);
    WriteDump(tmp_ / "tgt", tgt);
    CompareOptions o;
    o.reference = tmp_ / "ref";
    o.target = tmp_ / "tgt";
    o.match = match;
    o.align_budget = budget;
    auto r = RunCompare(o, ctx_);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : CompareReport{};
  }
};

}  // namespace portkit::accuracy::testing
