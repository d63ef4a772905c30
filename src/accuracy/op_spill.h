#pragma once
/// The operators of a dump as a compare read them, kept for a renderer that prints more of them
/// than the rows hold (the msprobe layout: non-tensor arguments, the dump's own statistics,
/// stacks), so the dump need not be read again: in an unnamed temporary file when the compare
/// spills its rows (constant memory however many calls), else in memory. Written once in read
/// order, then read forward any number of times.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "accuracy/dump.h"
#include "core/status.h"

namespace portkit::accuracy {

/// Opens an unnamed temporary file for reading and writing in `dir` (O_TMPFILE, or a file
/// unlinked at once where the file system has none): its descriptor, or an I/O error naming `dir`
/// and `what` the file was for. `stem` names the file in the short time it has a name.
Expected<int> OpenUnnamedTempFile(const std::filesystem::path& dir, const std::string& stem, const std::string& what);

class OpSpill {
 public:
  /// Operators kept in a temporary file in `dir` (O_TMPFILE, else a name unlinked at once), or in
  /// memory when `dir` is empty. An IoError naming `dir` when the file cannot be made.
  static Expected<std::shared_ptr<OpSpill>> Create(const std::filesystem::path& dir);
  ~OpSpill();
  OpSpill(const OpSpill&) = delete;
  OpSpill& operator=(const OpSpill&) = delete;

  /// Adds an operator (its index, name, phase, stack, call, tensors without their notes, scalars).
  Status Append(const DumpOp& op);
  /// Writes what is buffered; call once after the last Append.
  Status Flush();

  /// Reads the operators back in order, one at a time.
  class Reader {
   public:
    /// The next operator into `op`: true, false at the end, an IoError when the file cannot be
    /// read back.
    Expected<bool> Next(DumpOp& op);

   private:
    friend class OpSpill;
    explicit Reader(const OpSpill& spill) : spill_(spill) {}
    const OpSpill& spill_;
    std::string buf_;
    size_t pos_ = 0;        ///< of the next record in buf_
    uint64_t read_ = 0;     ///< bytes of the file in buf_ so far
    size_t in_memory_ = 0;  ///< next operator of a spill kept in memory
  };
  Reader Read() const { return Reader(*this); }

 private:
  OpSpill(int fd, std::filesystem::path dir) : fd_(fd), dir_(std::move(dir)) {}
  Status ReadError(const std::string& why) const;

  int fd_ = -1;  ///< -1: kept in memory
  std::filesystem::path dir_;
  std::string buf_;  ///< records not yet written
  uint64_t size_ = 0;
  std::vector<DumpOp> ops_;  ///< when kept in memory
};

}  // namespace portkit::accuracy
