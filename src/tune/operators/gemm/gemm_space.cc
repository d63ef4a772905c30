#include "tune/operators/gemm/gemm_space.h"

#include <algorithm>

namespace portkit::tune {

SearchSpace GemmSpace(int hardware_threads) {
  std::vector<int> threads;
  for (int t = 1; t <= std::max(1, hardware_threads); t *= 2) threads.push_back(t);
  if (threads.back() != std::max(1, hardware_threads)) threads.push_back(hardware_threads);
  std::vector<Knob> knobs = {
      {"MC", {48, 96, 192}, "rows of A per cache block (L2)"},
      {"NC", {768, 1536, 3072}, "columns of B per cache block (L3)"},
      {"KC", {128, 256, 512}, "depth of a cache block (L1 panel)"},
      {"MR", {4, 6, 8, 12}, "rows of the register tile"},
      {"NR", {16, 32, 48}, "columns of the register tile"},
      {"VW", {8, 16}, "vector width in floats (GCC vector extensions: 8 = 256-bit, 16 = 512-bit)"},
      {"PACK_A", {0, 1}, "pack A blocks into MR-tall panels (B is always packed)"},
      {"ORDER", {0, 1}, "register-tile loop order: 0 = columns outer, 1 = rows outer"},
      {"UNROLL", {1, 4}, "unroll factor of the k loop of the micro-kernel"},
      {"THREADS", threads, "worker threads (std::thread), split along the larger of M and N"},
  };
  auto constraint = [](const SearchSpace& s, const Config& c) -> std::string {
    int mr = s.Get(c, "MR"), nr = s.Get(c, "NR"), vw = s.Get(c, "VW");
    if (nr % vw) return "NR must be a multiple of VW";
    if (s.Get(c, "MC") % mr) return "MC must be a multiple of MR";
    if (s.Get(c, "NC") % nr) return "NC must be a multiple of NR";
    // Accumulators (MR x NR/VW vectors), one row of B (NR/VW) and a broadcast must fit the 32
    // vector registers of AVX-512 (a 512-bit vector on a 256-bit machine takes two).
    int nv = nr / vw;
    if (mr * nv + nv + 1 > 32) return "register tile too large (MR*NR/VW + NR/VW + 1 > 32 registers)";
    return "";
  };
  return SearchSpace(std::move(knobs), constraint);
}

Config GemmDefault(const SearchSpace& space, int hardware_threads) {
  Config c(space.knobs().size());
  auto set = [&](const char* name, int v) {
    int i = space.Find(name);
    if (i >= 0) c[static_cast<size_t>(i)] = v;
  };
  set("MC", 96);
  set("NC", 1536);
  set("KC", 256);
  set("MR", 6);
  set("NR", 16);
  set("VW", 16);
  set("PACK_A", 1);
  set("ORDER", 0);
  set("UNROLL", 1);
  set("THREADS", space.knobs()[static_cast<size_t>(space.Find("THREADS"))].values.back());
  (void)hardware_threads;
  // A pinned space (--fix) may exclude a default value: take the knob's first value then.
  for (size_t i = 0; i < c.size(); ++i) {
    const auto& v = space.knobs()[i].values;
    if (std::find(v.begin(), v.end(), c[i]) == v.end()) c[i] = v.front();
  }
  // The substitution may break a constraint (--fix NR=48 with VW=16 and MR=6 needs 19 + 3 + 1
  // registers...): take the valid configuration that differs from it in the fewest knobs (the
  // first in enumeration order on ties). When none is valid the caller rejects the --fix set.
  if (!space.Valid(c)) {
    Config best;
    size_t best_diff = c.size() + 1;
    for (const auto& v : space.Enumerate()) {
      size_t diff = 0;
      for (size_t i = 0; i < c.size(); ++i) diff += v[i] != c[i];
      if (diff < best_diff) {
        best_diff = diff;
        best = v;
      }
    }
    if (!best.empty()) c = best;
  }
  return c;
}

std::string GemmDefines(const SearchSpace& space, const Config& c) {
  std::string out = "// portkit tune candidate: " + space.Key(c) + "\n";
  for (size_t i = 0; i < c.size(); ++i)
    out += "#define PK_" + space.knobs()[i].name + " " + std::to_string(c[i]) + "\n";
  return out;
}

}  // namespace portkit::tune
