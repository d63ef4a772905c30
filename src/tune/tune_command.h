#pragma once
#include "core/context.h"

namespace portkit::tune {

/// `portkit tune`: operator auto-tuning (OPAT) with a knowledge base, and `portkit tune bank`.
int TuneMain(int argc, char** argv, Context& ctx);

}  // namespace portkit::tune
