// Zip directory reader (APPNOTE.TXT 6.3: end of central directory record 4.3.16, ZIP64 end record
// and locator 4.3.14-15, central directory headers 4.3.12, local headers 4.3.7, the ZIP64 extended
// information extra field 4.5.3). Every read goes through Reader, which checks its range first.
#include "accuracy/zip_directory.h"

namespace portkit::accuracy {
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kEndRecord = 0x06054b50;
constexpr uint32_t kZip64EndRecord = 0x06064b50;
constexpr uint32_t kZip64Locator = 0x07064b50;

/// Little-endian fields of `bytes` at checked positions.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  bool Has(uint64_t at, uint64_t n) const { return at <= bytes_.size() && n <= bytes_.size() - at; }
  uint64_t Le(uint64_t at, int n) const {  // caller checked Has(at, n)
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(bytes_[at + static_cast<uint64_t>(i)]);
    return v;
  }
  std::string_view Sub(uint64_t at, uint64_t n) const { return bytes_.substr(at, n); }
  uint64_t size() const { return bytes_.size(); }

 private:
  std::string_view bytes_;
};

}  // namespace

Expected<std::vector<ZipEntry>> ReadZipDirectory(std::string_view bytes, const std::string& path) {
  Reader r(bytes);
  auto bad = [&](const std::string& what) { return ParseError(path + ": " + what); };
  if (r.size() < 22) return bad("too short for a zip archive (" + std::to_string(r.size()) + " bytes): truncated?");
  // The end record is the last 22 bytes plus a comment of at most 65535 bytes.
  uint64_t end = UINT64_MAX;
  const uint64_t lowest = r.size() >= 22 + 65535 ? r.size() - 22 - 65535 : 0;
  for (uint64_t at = r.size() - 22 + 1; at-- > lowest;) {
    if (r.Le(at, 4) == kEndRecord && at + 22 + r.Le(at + 20, 2) == r.size()) {
      end = at;
      break;
    }
  }
  if (end == UINT64_MAX) return bad("no zip end-of-directory record: truncated, or not a zip archive");
  uint64_t entries = r.Le(end + 10, 2), dir_size = r.Le(end + 12, 4), dir_offset = r.Le(end + 16, 4);
  if (r.Le(end + 4, 2) != 0 || r.Le(end + 6, 2) != 0) return bad("a zip archive split over several disks is not read");
  if (entries == 0xFFFF || dir_size == 0xFFFFFFFF || dir_offset == 0xFFFFFFFF) {
    // ZIP64: the locator sits right before the end record and points at the ZIP64 end record.
    if (end < 20 || r.Le(end - 20, 4) != kZip64Locator) return bad("ZIP64 fields without a ZIP64 locator");
    uint64_t at = r.Le(end - 20 + 8, 8);
    if (!r.Has(at, 56) || r.Le(at, 4) != kZip64EndRecord) return bad("the ZIP64 end record lies outside the file");
    entries = r.Le(at + 32, 8), dir_size = r.Le(at + 40, 8), dir_offset = r.Le(at + 48, 8);
  }
  if (!r.Has(dir_offset, dir_size)) {
    return bad("the zip directory (" + std::to_string(dir_size) + " bytes at " + std::to_string(dir_offset) +
               ") lies outside the file (" + std::to_string(r.size()) + " bytes): truncated?");
  }
  if (entries > dir_size / 46)
    return bad("the zip directory claims " + std::to_string(entries) + " entries in " + std::to_string(dir_size) +
               " bytes");
  std::vector<ZipEntry> out;
  out.reserve(static_cast<size_t>(entries));
  uint64_t at = dir_offset;
  const uint64_t dir_end = dir_offset + dir_size;
  for (uint64_t i = 0; i < entries; ++i) {
    if (at > dir_end || dir_end - at < 46 || r.Le(at, 4) != kCentralHeader)
      return bad("zip directory entry " + std::to_string(i) + " is damaged");
    ZipEntry e;
    const uint64_t flags = r.Le(at + 8, 2);
    e.method = static_cast<uint16_t>(r.Le(at + 10, 2));
    e.encrypted = (flags & 1) != 0;
    e.size = r.Le(at + 20, 4);
    e.uncompressed_size = r.Le(at + 24, 4);
    const uint64_t name_len = r.Le(at + 28, 2), extra_len = r.Le(at + 30, 2), comment_len = r.Le(at + 32, 2);
    uint64_t local = r.Le(at + 42, 4);
    if (dir_end - at - 46 < name_len + extra_len + comment_len)
      return bad("zip directory entry " + std::to_string(i) + " runs past the directory");
    e.name = std::string(r.Sub(at + 46, name_len));
    // ZIP64 extended information: the 8-byte values of the fields set to all ones, in this order.
    for (uint64_t x = at + 46 + name_len, x_end = x + extra_len; x + 4 <= x_end;) {
      const uint64_t id = r.Le(x, 2), len = r.Le(x + 2, 2);
      if (len > x_end - x - 4) break;
      if (id == 0x0001) {
        uint64_t v = x + 4, v_end = v + len;
        auto take = [&](uint64_t& field) {
          if (v + 8 > v_end) return false;
          field = r.Le(v, 8), v += 8;
          return true;
        };
        if ((e.uncompressed_size == 0xFFFFFFFF && !take(e.uncompressed_size)) ||
            (e.size == 0xFFFFFFFF && !take(e.size)) || (local == 0xFFFFFFFF && !take(local)))
          return bad("zip entry " + e.name + ": ZIP64 extra field too short");
      }
      x += 4 + len;
    }
    if (!r.Has(local, 30) || r.Le(local, 4) != kLocalHeader)
      return bad("zip entry " + e.name + ": its local header lies outside the file or is damaged");
    const uint64_t data = local + 30 + r.Le(local + 26, 2) + r.Le(local + 28, 2);
    if (!r.Has(data, e.size))
      return bad("zip entry " + e.name + ": " + std::to_string(e.size) + " bytes of data at " + std::to_string(data) +
                 " run past the end of the file (" + std::to_string(r.size()) + " bytes): truncated?");
    e.offset = data;
    out.push_back(std::move(e));
    at += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

}  // namespace portkit::accuracy
