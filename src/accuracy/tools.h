#pragma once
/// `portkit overflow`, `portkit convert`, `portkit extract`: working with dumps.
#include "core/context.h"

namespace portkit::accuracy {

int OverflowMain(int argc, char** argv, Context& ctx);
int ConvertMain(int argc, char** argv, Context& ctx);
int ExtractMain(int argc, char** argv, Context& ctx);

}  // namespace portkit::accuracy
