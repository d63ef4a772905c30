#pragma once
/// msprobe (mindstudio-probe) PyTorch dumps as compare input: a `stepN/rankR/` folder holding
/// dump.json (statistics, md5 or tensor mode). See msprobe_dump.cc.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "accuracy/dump.h"
#include "core/status.h"

namespace portkit::accuracy {

/// The default of MsprobeDumpReader's cap on one call: 64 MiB of JSON text.
inline constexpr uint64_t kDefaultMaxCallBytes = uint64_t{64} << 20;

/// Whether `dir` holds an msprobe dump.json and no portkit manifest.
bool IsMsprobeDump(const std::filesystem::path& dir);

/// An msprobe dump.json read as a stream, one call at a time: memory is one call's JSON text and
/// its DOM plus a 1 MiB read buffer, however many calls the file holds (a 179 MB dump.json of
/// 300k calls is never held whole). Each call of `data` becomes one operator (see
/// msprobe_dump.cc); in tensor mode with a dump_tensor_data/ folder, operators with data files get
/// kTensorDataFolder as their file and each tensor its data_name (read by compare through
/// TensorDataPath / TensorDataFile).
class MsprobeDumpReader {
 public:
  /// Opens DIR/dump.json (a link or a FIFO is refused) and reads up to the start of its "data"
  /// object: kParse naming the file when it is not a JSON object or has no "data" object.
  /// `max_call_bytes` (0: none) caps one call's JSON text: a larger one is a kInvalidArgument
  /// error "over the limit" naming the flag `--max-call-mb`.
  static Expected<MsprobeDumpReader> Open(const std::filesystem::path& dir,
                                          uint64_t max_call_bytes = kDefaultMaxCallBytes);
  MsprobeDumpReader(MsprobeDumpReader&&) noexcept;
  MsprobeDumpReader& operator=(MsprobeDumpReader&&) noexcept;
  ~MsprobeDumpReader();

  /// The next call into `op` (replaced): true, or false once `data` and the document ended. Each
  /// call is parsed as JSON; the other top-level members are scanned (brackets, strings), not
  /// parsed. A document that breaks off, a call that is not valid JSON, or text after the document
  /// is a kParse error naming the file and the byte.
  Expected<bool> Next(DumpOp& op);
  /// Notes about the dump (calls without an API name skipped, tensor mode without data files);
  /// complete once Next() returned false.
  const std::string& warning() const;

 private:
  struct State;
  explicit MsprobeDumpReader(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

/// msprobe's stack.json beside dump.json: {call name: stack lines} (empty when there is none).
/// kParse naming the file when it is not msprobe's layout of JSON; a file over `max_bytes` (0:
/// no cap) is refused, "over the limit".
Expected<std::map<std::string, std::vector<std::string>>> LoadMsprobeStacks(const std::filesystem::path& dir,
                                                                            uint64_t max_bytes = uint64_t{256} << 20);

/// Every call at once (MsprobeDumpReader read to the end).
Expected<Dump> LoadMsprobeDump(const std::filesystem::path& dir, uint64_t max_call_bytes = kDefaultMaxCallBytes);

}  // namespace portkit::accuracy
