#pragma once
/// Operators from a profile folder imported by `portkit prof import` (portkit.db), when it was
/// recorded with shapes: aten::mm becomes MatMul, aten::addmm MatMul with bias, counted per call.
/// aten::conv2d is listed untuned (profiles do not record its stride and padding).
#include <filesystem>

#include "tune/op_desc.h"

namespace portkit::tune {

Expected<OpList> OpsFromProfile(const std::filesystem::path& folder);

}  // namespace portkit::tune
