#pragma once
/// Importer for torch_npu's `kernel_details.csv` (device tasks of an Ascend profile): one kernel
/// event per row, columns found by name (`Name`, `Type`, `Start Time(us)`, `Duration(us)`,
/// `Stream ID`, `Device_id`, `Block Dim`, `Input Shapes`, `Input Data Types`, `Step Id`).
#include <string>

#include "prof/importers/chrome_trace.h"
#include "prof/store.h"

namespace portkit::prof {

bool SniffKernelDetails(const std::string& path);
Expected<ImportResult> ImportKernelDetails(const std::string& path, const std::string& display, Store& store);

}  // namespace portkit::prof
