#pragma once
/// `analyse -m third_party`: which functions of a library transitively reach an unsupported or
/// unknown API or a custom CUDA op, over the project's call graph, propagating through
/// strongly connected components so recursion cycles are handled; and `-api`, the reuse of such
/// results when analysing code that calls the library.
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyse/analysis_run.h"
#include "core/status.h"

namespace portkit::analyse {

/// Results of earlier third_party runs (full_unsupported_results.csv), by public API name.
class ThirdPartyApis {
 public:
  /// Reads each CSV's `3rd-party API` and `Message` columns. Errors name the file and line.
  static Expected<ThirdPartyApis> Load(const std::vector<std::string>& files);
  /// The library's evidence for `qname`, or null when it is not an affected API.
  const std::string* Evidence(const std::string& qname) const;
  size_t size() const { return apis_.size(); }

 private:
  std::unordered_map<std::string, std::string> apis_;
};

/// Which bucket an offending call falls in.
enum class Bucket : uint8_t { kMigrationNeeded, kFrameworkUnsupported, kUnknown, kCudaOp };

/// One offending call inside a project function.
struct Offence {
  Bucket bucket;
  std::string api;
  std::string file;
  uint32_t line = 0;
  bool operator<(const Offence& o) const {
    return std::tie(bucket, api, file, line) < std::tie(o.bucket, o.api, o.file, o.line);
  }
};

struct AffectedFunction {
  std::string qualname;
  std::string file;
  uint32_t line = 0;
  std::vector<std::string> spellings;  ///< defining name first, then public re-exports
  /// Offending calls shown as evidence: the function's own, or those of the function at the end
  /// of the witness path.
  std::vector<Offence> offences;
  /// Every (bucket, API) the function reaches, transitively.
  std::vector<std::pair<Bucket, std::string>> apis;
  std::vector<std::string> path;  ///< witness: this function → ... → a function with a direct offence
  /// Reaches an unsupported API or a custom op without a target kernel (not only CUDA calls
  /// that migrate rewrites, nor only unknown APIs): only these are rows of
  /// full_unsupported_results.csv; the path and offences then lead to one. The others are listed
  /// in migration_needed_op.csv and unknown_op.csv.
  bool real = false;
};

/// Whether a bucket makes a library function unusable on the target as it is: an unsupported
/// framework API or a custom CUDA op. CUDA-specific calls (migration_needed_op.csv) and unknown
/// APIs do not.
bool IsRealOffence(Bucket b);

/// Classifies a finding of the torch_apis rules as an offence; false if it is not one.
bool OffenceOf(const Finding& f, Offence* out);

/// Call graph → affected functions, sorted by qualified name.
std::vector<AffectedFunction> PropagateAffected(const std::vector<DefinitionRecord>& definitions,
                                                const std::vector<CallRecord>& calls,
                                                const std::vector<Finding>& findings,
                                                const std::multimap<std::string, std::string>& spellings_by_qualname);

}  // namespace portkit::analyse
