// Locating the culprit without replay (error growth from inputs to outputs), with replay first,
// discrete and negligible outputs left out, and the origin of the first inf/nan in `overflow`.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "accuracy/api.h"
#include "core/log.h"
#include "render/dump_tools_render.h"
#include "test_dump.h"

namespace portkit::accuracy {
namespace {
namespace fs = std::filesystem;
using testing::F32;
using testing::I64;
using testing::TestOp;
using testing::TestTensor;
using testing::WriteDump;

class LocalisationTest : public testing::DumpTest {
 protected:
  CompareReport Compare(const std::vector<TestOp>& ref, const std::vector<TestOp>& tgt) {
    return CompareDumps(ref, tgt);
  }
};

/// Deterministic values near a standard normal (sum of uniforms).
std::vector<float> Noise(size_t n, uint32_t seed) {
  std::vector<float> out(n);
  for (auto& v : out) {
    double s = 0;
    for (int k = 0; k < 12; ++k) seed = seed * 1664525u + 1013904223u, s += (seed >> 8) / 16777216.0;
    v = static_cast<float>(s - 6);
  }
  return out;
}

/// float32 → bf16 bytes (round to nearest even).
TestTensor Bf16(std::string key, const std::vector<float>& v) {
  std::vector<uint16_t> b;
  for (float f : v) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    b.push_back(static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16));
  }
  return {std::move(key), "BF16", {static_cast<int64_t>(v.size())}, testing::Bytes(b), ""};
}

/// A chain of elementwise operators: the input of op i is the output of op i-1. `plant` adds
/// `size` × noise to the output of op `at` (the target run), and everything after it is computed
/// from that output.
std::vector<TestOp> Chain(int at, double size, bool bf16 = false) {
  const int kOps = 10;
  const char* names[] = {"aten::mul", "aten::add", "aten::tanh", "aten::sin", "aten::gelu"};
  std::vector<float> x = Noise(512, 7), z = Noise(512, 99);
  std::vector<TestOp> ops;
  for (int i = 0; i < kOps; ++i) {
    std::vector<float> y(x.size());
    for (size_t e = 0; e < x.size(); ++e) {
      double v = x[e];
      switch (i % 5) {
        case 0: v *= 1.5; break;
        case 1: v += 0.3; break;
        case 2: v = std::tanh(v); break;
        case 3: v = std::sin(2 * v); break;
        default: v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); break;
      }
      if (i == at) v += size * z[e];
      y[e] = static_cast<float>(v);
    }
    TestOp op{names[i % 5], "forward", {}};
    op.tensors.push_back(bf16 ? Bf16("input.0", x) : F32("input.0", x));
    op.tensors.push_back(bf16 ? Bf16("output.0", y) : F32("output.0", y));
    ops.push_back(op);
    x = y;
  }
  return ops;
}

TEST_F(LocalisationTest, PlantedErrorsAreNamedAndIdenticalRunsNameNone) {
  EXPECT_FALSE(Compare(Chain(-1, 0), Chain(-1, 0)).first_divergence.has_value());
  EXPECT_FALSE(Compare(Chain(-1, 0, true), Chain(-1, 0, true)).first_divergence.has_value());
  int hits = 0, cases = 0;
  for (int at : {1, 4, 7})
    for (double size : {1e-3, 1e-2, 1e-1}) {
      ++cases;
      auto r = Compare(Chain(-1, 0), Chain(at, size));
      ASSERT_TRUE(r.first_divergence.has_value()) << "op " << at << " size " << size;
      EXPECT_EQ(r.first_divergence->index, at) << "size " << size << " basis " << r.first_divergence_basis;
      hits += r.first_divergence->index == at;
      EXPECT_FALSE(r.first_divergence_evidence.empty());
      EXPECT_EQ(r.first_divergence_basis, "inputs matched") << r.first_divergence_evidence;  // its inputs are exact
    }
  EXPECT_EQ(hits, cases);
  // bf16 runs on both sides, a 1e-2 error planted: named too.
  auto b = Compare(Chain(-1, 0, true), Chain(4, 1e-2, true));
  ASSERT_TRUE(b.first_divergence.has_value());
  EXPECT_EQ(b.first_divergence->index, 4);
}

TEST_F(LocalisationTest, ReplayDecidesWhereItExists) {
  auto ref = Chain(-1, 0), tgt = Chain(4, 1e-2);
  // The op's output differs, but recomputed from the reference's inputs it agrees: the error is
  // not its own (replay says so), and nothing after it grows.
  tgt[4].tensors.push_back(ref[4].tensors[1]);
  tgt[4].tensors.back().key = "replay.output.0";
  tgt[4].replay = "{\"status\": \"ok\", \"reference_index\": 4}";
  auto r = Compare(ref, tgt);
  EXPECT_FALSE(r.first_divergence.has_value())
      << r.first_divergence->index << " " << r.first_divergence_basis << " " << r.first_divergence_evidence;
  // Its replayed output carries the error: named, on replay.
  tgt[4].tensors.back() = tgt[4].tensors[1];
  tgt[4].tensors.back().key = "replay.output.0";
  tgt[5].tensors.push_back(ref[5].tensors[1]);  // the next op replays clean
  tgt[5].tensors.back().key = "replay.output.0";
  tgt[5].replay = "{\"status\": \"ok\", \"reference_index\": 5}";
  auto named = Compare(ref, tgt);
  ASSERT_TRUE(named.first_divergence.has_value());
  EXPECT_EQ(named.first_divergence->index, 4);
  EXPECT_EQ(named.first_divergence_basis, "replay");
}

TEST_F(LocalisationTest, IndicesAndNumericallyZeroOutputsAreNotCulprits) {
  std::vector<float> g = Noise(64, 3), a = Noise(64, 5);
  // max_pool's indices differ on a tie; a bias gradient that cancels to ~1e-9 noise differs in
  // sign. Neither is the operator's own error.
  TestOp pool_r{"aten::max_pool2d_with_indices",
                "forward",
                {F32("input.0", a), F32("output.0", {1, 2}), I64("output.1", {0, 5})}};
  TestOp pool_t = pool_r;
  pool_t.tensors[2] = I64("output.1", {1, 5});
  TestOp conv_r{"aten::convolution_backward",
                "backward",
                {F32("input.0", g), F32("input.1", a), F32("output.0", {0.5f, -0.25f, 1}),
                 F32("output.2", {1e-9f, -2e-9f, 3e-9f})}};
  TestOp conv_t = conv_r;
  conv_t.tensors[3] = F32("output.2", {-2e-9f, 1e-9f, 0.5e-9f});
  auto r = Compare({pool_r, conv_r}, {pool_t, conv_t});
  EXPECT_FALSE(r.first_divergence.has_value()) << r.first_divergence->name;
  const CompareRow* bias = nullptr;
  for (const auto& row : r.rows)
    if (row.target.name == "aten::convolution_backward.backward.1.output.2") bias = &row;
  ASSERT_NE(bias, nullptr);
  EXPECT_TRUE(bias->negligible);
  EXPECT_EQ(bias->verdict, Verdict::kYes) << bias->message;
  EXPECT_LT(bias->metrics.at("Cosine"), 0.9);  // what used to make it the culprit
  EXPECT_TRUE(r.rows.at(2).discrete);
}

TEST_F(LocalisationTest, OverflowNamesTheOriginNotTheMask) {
  auto ops = std::vector<TestOp>{
      {"aten::full", "forward", {F32("output.0", {-INFINITY, -INFINITY})}, true},
      {"aten::triu", "forward", {F32("input.0", {-INFINITY, -INFINITY}), F32("output.0", {0, -INFINITY})}, true},
      {"aten::empty", "forward", {F32("output.0", {NAN, 0})}, true},
      {"aten::masked_fill", "forward", {F32("input.0", {1, 2}), F32("output.0", {1, -INFINITY})}, true},
      {"aten::_softmax", "forward", {F32("input.0", {1, -INFINITY}), F32("output.0", {1, 0})}, true},
      {"aten::sum", "forward", {F32("input.0", {3e38f, 3e38f}), F32("output.0", {INFINITY})}, true},
      {"aten::div", "backward", {F32("input.0", {1, 0}), F32("output.0", {1, INFINITY})}, true},
  };
  WriteDump(tmp_ / "dump", ops);
  auto r = RunOverflow({tmp_ / "dump"}, ctx_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_FALSE(r->overflowing.empty());
  EXPECT_EQ(r->overflowing.front().name, "aten::full");
  ASSERT_TRUE(r->origin.has_value());
  EXPECT_EQ(r->origin->name, "aten::sum");
  EXPECT_EQ(r->origin->index, 5);
  EXPECT_EQ(r->origin_basis, "finite inputs");
  EXPECT_TRUE(r->overflowing.front().deliberate);
  EXPECT_TRUE(r->HasComputedOverflow());
  WriteDump(tmp_ / "mask", {ops[0], ops[1], ops[3], ops[4]});  // a causal mask and its softmax only
  auto mask = RunOverflow({tmp_ / "mask"}, ctx_);
  ASSERT_TRUE(mask.ok());
  EXPECT_FALSE(mask->origin.has_value());
  ASSERT_EQ(mask->overflowing.size(), 3u);    // full, triu, masked_fill: listed...
  EXPECT_TRUE(mask->overflowing[1].mask);     // ...triu passes the mask along
  EXPECT_FALSE(mask->HasComputedOverflow());  // ...and the --fail-on-overflow gate stays quiet
  std::string text = render::OverflowText(*r);
  EXPECT_NE(text.find("Origin of the first inf/nan: aten::sum #5"), std::string::npos) << text;
  std::string json = render::OverflowJson(*r);
  EXPECT_NE(json.find("\"origin_basis\": \"finite inputs\""), std::string::npos) << json;
  // The backward overflow alone: named in the backward phase.
  WriteDump(tmp_ / "bwd", {ops[0], ops[3], ops[6]});
  auto b = RunOverflow({tmp_ / "bwd"}, ctx_);
  ASSERT_TRUE(b.ok() && b->origin.has_value());
  EXPECT_EQ(b->origin->name, "aten::div");
  EXPECT_EQ(b->origin->phase, "backward");
  // A dump without inputs: the first computing operator with inf/nan, said so.
  std::vector<TestOp> outputs_only;
  for (auto op : ops) {
    op.tensors.erase(std::remove_if(op.tensors.begin(), op.tensors.end(),
                                    [](const TestTensor& t) { return t.key.rfind("input", 0) == 0; }),
                     op.tensors.end());
    outputs_only.push_back(op);
  }
  WriteDump(tmp_ / "out", outputs_only);
  auto o = RunOverflow({tmp_ / "out"}, ctx_);
  ASSERT_TRUE(o.ok() && o->origin.has_value());
  EXPECT_EQ(o->origin_basis, "inputs not dumped");
  EXPECT_EQ(o->origin->name, "aten::sum");  // triu's -inf alone is taken for a mask
}

}  // namespace
}  // namespace portkit::accuracy
