#pragma once
/// The directory of a zip archive held in memory (a mapped file), as torch.save writes it: entries
/// *stored* (no compression), their data aligned, ZIP64 records when the archive or an entry passes
/// 4 GB or 65535 entries. Only the directory is read here; every entry's data range is checked to
/// lie inside the archive, so a header that lies about offsets or sizes is an error naming the file,
/// never a read out of bounds.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace portkit::accuracy {

struct ZipEntry {
  std::string name;
  uint64_t offset = 0;  ///< of the entry's data (after its local header) in the archive
  uint64_t size = 0;    ///< bytes of data as stored (compressed size)
  uint64_t uncompressed_size = 0;
  uint16_t method = 0;  ///< 0: stored; 8: deflate; ...
  bool encrypted = false;
};

/// The entries of the archive `bytes`, in directory order. Errors (kParse) read
/// `PATH: what is wrong`: no end-of-directory record (truncated, or not a zip file), a directory or
/// local header outside the file, an entry whose data runs past the end. `path` only names the file.
Expected<std::vector<ZipEntry>> ReadZipDirectory(std::string_view bytes, const std::string& path);

}  // namespace portkit::accuracy
