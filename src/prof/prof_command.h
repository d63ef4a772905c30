#pragma once
/// `portkit prof`: profiles of PyTorch programs (seed 003). This build has `prof import`.
#include "core/context.h"

namespace portkit::prof {

int ProfMain(int argc, char** argv, Context& ctx);

}  // namespace portkit::prof
