#pragma once
/// The knobs of the blocked GEMM core (shared by MatMul and Conv2D, which lowers to it).
#include <string>

#include "tune/search_space.h"

namespace portkit::tune {

/// MC/NC/KC cache blocks, MR x NR register tile, VW vector width (floats), PACK_A, ORDER of the
/// register-tile loops, UNROLL of the k loop, THREADS (1 .. hardware_threads).
SearchSpace GemmSpace(int hardware_threads);
/// The untuned default: a generic tile and blocking, all cores.
Config GemmDefault(const SearchSpace& space, int hardware_threads);
/// `#define PK_<KNOB> value` lines for a configuration.
std::string GemmDefines(const SearchSpace& space, const Config& c);

}  // namespace portkit::tune
