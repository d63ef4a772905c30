#pragma once
/// msprobe (mindstudio-probe) PyTorch dumps as compare input: a `stepN/rankR/` folder holding
/// dump.json (statistics, md5 or tensor mode). See msprobe_dump.cc.
#include <filesystem>

#include "accuracy/dump.h"
#include "core/status.h"

namespace portkit::accuracy {

/// Whether `dir` holds an msprobe dump.json and no portkit manifest.
bool IsMsprobeDump(const std::filesystem::path& dir);

/// The dump's calls as operators with msprobe's statistics; in tensor mode with a
/// dump_tensor_data/ folder, operators with data files get kTensorDataFolder as their file and
/// each tensor its data_name (read by compare through TensorDataPath / TensorDataFile).
Expected<Dump> LoadMsprobeDump(const std::filesystem::path& dir);

}  // namespace portkit::accuracy
