#pragma once
/// `portkit analyse -m dynamic_shape`: writes an instrumented copy of the project with the
/// runtime detector package `msft_dynamic_analysis/` beside it. Every original line
/// keeps its number in the copy; the training data loop is wrapped in `DETECTOR.start(...)` where
/// it can be recognised.
#include <filesystem>
#include <string>
#include <vector>

#include "analyse/analyse_modes.h"
#include "analyse/project_loader.h"

namespace portkit::analyse {

/// A loop the instrumentation wraps.
struct WrappedLoop {
  uint32_t line = 0;        ///< 1-based line of the `for`
  uint32_t start_byte = 0;  ///< the iterable expression's byte range in the source
  uint32_t end_byte = 0;
  std::string iterable;  ///< its text
  bool module_level = false;
  bool at_iterator = false;  ///< the loader of `iter(loader)` kept for `next()`, not a `for`
};

/// A loop that looked like a data loop but was not wrapped, and why (logged when a project has
/// no wrapped loop at all).
struct RejectedLoop {
  uint32_t line = 0;
  std::string iterable;
  std::string reason;
};

/// Finds the data loops of one parsed file (a `for` over a DataLoader, over any wrapper that
/// takes one as its first argument, over a name re-bound through such wrappers, over a `zip` with
/// one; an `iter(loader)` kept for `next()`) using the walker's values. Loops inside Dataset,
/// Sampler and loader classes are not data loops; they and other candidates are appended to
/// `rejected` with the reason.
std::vector<WrappedLoop> FindDataLoops(const PySyntax& syn, const ParsedSource& src, const ModuleSummary& summary,
                                       ProjectIndex& index, std::vector<RejectedLoop>* rejected = nullptr);

/// The source with the loops wrapped and the import of DETECTOR added on an existing line
/// (no line is added or removed). `depth` is the folder depth of the file in the copy.
/// `warning` is set when the import could only be placed after a module-level loop.
std::string InstrumentSource(const PySyntax& syn, const ParsedSource& src, const std::vector<WrappedLoop>& loops,
                             int depth, std::string* warning);

}  // namespace portkit::analyse
