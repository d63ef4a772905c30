#include "prof/json_stream.h"

#include <zlib.h>

#include <sys/stat.h>

#include <cstring>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <vector>

#include "core/input_files.h"

namespace portkit::prof {
namespace {

/// Byte classes for the scanning loops (one table look-up a byte).
struct ByteTable {
  bool at[256] = {};
  constexpr explicit ByteTable(std::string_view chars) {
    for (char c : chars) at[static_cast<unsigned char>(c)] = true;
  }
};
constexpr ByteTable kStructural(std::string_view("\"\\{}[]"));
constexpr ByteTable kStringEnd(std::string_view("\"\\"));

/// Buffered reader over gzFile with a sliding window the scanner can keep text in. The window
/// holds the bytes from the Keep() mark (while one is set) or the current position onwards, so
/// whitespace and skipped text never accumulate; kept text over `limits.max_object_bytes`, or a
/// gzip file that expands past `limits.max_expansion`, stops the read with `limit_error()`.
class Reader {
 public:
  Reader(gzFile f, std::string path, bool compressed, uint64_t compressed_bytes, const ImportLimits& limits)
      : f_(f), path_(std::move(path)), compressed_(compressed), compressed_bytes_(compressed_bytes), limits_(limits) {
    buf_.reserve(1 << 20);
  }
  /// Makes at least one more byte available at pos_; false at end of input, on error or at a limit.
  bool Fill() {
    if (pos_ < buf_.size()) return true;
    if (!limit_error_.ok()) return false;
    // Drop everything before the oldest byte still needed.
    size_t drop = keeping_ ? std::min(keep_, pos_) : pos_;
    if (drop > 0) {
      buf_.erase(0, drop);
      pos_ -= drop;
      keep_ -= std::min(keep_, drop);
      base_ += drop;
    }
    if (keeping_ && pos_ - keep_ > limits_.max_object_bytes) {
      limit_error_ = InvalidArgument(
          path_ + ": over the limit: an event or member larger than " + std::to_string(limits_.max_object_bytes >> 20) +
          " MiB at byte " + std::to_string(base_ + keep_) + "; not imported. --max-object-mb raises the limit");
      return false;
    }
    char chunk[1 << 16];
    int n = gzread(f_, chunk, sizeof chunk);
    if (n <= 0) {
      int err = 0;
      const char* msg = gzerror(f_, &err);
      if (n < 0 || (err != Z_OK && err != Z_STREAM_END)) error_ = msg ? msg : "read error";
      return false;
    }
    // Room for the padding after the last byte (kEventPadding): reserved, never part of the text.
    if (buf_.capacity() < buf_.size() + static_cast<size_t>(n) + kEventPadding)
      buf_.reserve(2 * (buf_.size() + static_cast<size_t>(n) + kEventPadding));
    buf_.append(chunk, static_cast<size_t>(n));
    read_ += static_cast<uint64_t>(n);
    if (Status st = CheckExpansion(path_, compressed_, compressed_bytes_, read_, limits_); !st.ok()) {
      limit_error_ = st;
      buf_.resize(pos_);  // nothing of this piece is read
      return false;
    }
    return true;
  }
  bool Peek(char* c) {
    if (pos_ >= buf_.size() && !Fill()) return false;  // refill only when the window is used up
    *c = buf_[pos_];
    return true;
  }
  bool Next(char* c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }
  bool SkipSpace(char* c) {
    for (;;) {
      if (!Peek(c)) return false;
      if (*c != ' ' && *c != '\n' && *c != '\r' && *c != '\t') return true;
      ++pos_;
    }
  }
  /// Advances over bytes that are neither a quote, a backslash nor a bracket: the bulk of an
  /// event's text, scanned without per-byte refill checks.
  void SkipPlain() {
    const char* p = buf_.data() + pos_;
    const char* end = buf_.data() + buf_.size();
    while (p < end && !kStructural.at[static_cast<unsigned char>(*p)]) ++p;
    pos_ = static_cast<size_t>(p - buf_.data());
  }
  /// The unread bytes of the window: [cursor(), end()); SetCursor() moves pos_ within them.
  const char* cursor() const { return buf_.data() + pos_; }
  const char* end() const { return buf_.data() + buf_.size(); }
  void SetCursor(const char* p) { pos_ = static_cast<size_t>(p - buf_.data()); }
  /// Advances to the next quote or backslash (inside a string).
  void SkipStringBody() {
    const char* p = buf_.data() + pos_;
    const char* end = buf_.data() + buf_.size();
    while (p < end && !kStringEnd.at[static_cast<unsigned char>(*p)]) ++p;
    pos_ = static_cast<size_t>(p - buf_.data());
  }
  size_t pos() const { return pos_; }
  void Keep(size_t from) {
    keep_ = from;
    keeping_ = true;
  }
  void Release() {
    keep_ = pos_;
    keeping_ = false;
  }
  /// The bytes from the Keep() mark to the current position (the mark moves with the window).
  std::string_view KeptText() const { return std::string_view(buf_).substr(keep_, pos_ - keep_); }
  uint64_t offset() const { return base_ + pos_; }
  uint64_t bytes_read() const { return read_; }
  const std::string& error() const { return error_; }
  const Status& limit_error() const { return limit_error_; }

 private:
  gzFile f_;
  std::string path_;
  bool compressed_;
  uint64_t compressed_bytes_;
  ImportLimits limits_;
  std::string buf_;
  size_t pos_ = 0, keep_ = 0;
  bool keeping_ = false;
  uint64_t base_ = 0, read_ = 0;
  std::string error_;
  Status limit_error_ = Status::Ok();
};

/// Consumes the rest of a string whose opening quote was just read. False if the input ends first.
bool SkipStringRest(Reader& r) {
  char c;
  for (;;) {
    if (!r.Next(&c)) return false;
    if (c == '\\') {
      if (!r.Next(&c)) return false;
    } else if (c == '"') {
      return true;
    }
  }
}

/// Where the scan of an object or array stands between two windows: its depth, inside a string,
/// after a backslash.
struct ScanState {
  int depth = 0;
  bool in_string = false, escaped = false;
};

#ifdef __SSE2__
/// Scans the bytes from `*p` 16 at a time while 16 remain before `end`: a mask of the quotes,
/// backslashes and brackets, visited bit by bit (an escaped byte's bit is cleared; an escape in
/// the last byte carries to the next block). True when the value closed (the cursor is then past
/// it); else `*p` is where the 16-byte blocks end.
inline bool ScanBlocks(Reader& r, const char** p, const char* end, ScanState& s) {
  for (; end - *p >= 16; *p += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(*p));
    auto mask = [&](char x) { return static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(x)))); };
    const unsigned quote = mask('"'), backslash = mask('\\'), open = mask('{') | mask('['),
                   close = mask('}') | mask(']');
    unsigned todo = quote | backslash | open | close;
    if (s.escaped) todo &= ~1u, s.escaped = false;
    while (todo) {
      const int i = __builtin_ctz(todo);
      const unsigned bit = 1u << i;
      todo &= todo - 1;
      if (s.in_string) {
        if (backslash & bit) {
          if (i == 15) s.escaped = true;
          else todo &= ~(bit << 1);
        } else if (quote & bit) {
          s.in_string = false;
        }
      } else if (quote & bit) {
        s.in_string = true;
      } else if (open & bit) {
        ++s.depth;
      } else if ((close & bit) && --s.depth == 0) {
        r.SetCursor(*p + i + 1);
        return true;
      }
    }
  }
  return false;
}
#endif

/// Scans [p, end) byte by byte. True when the value closed (the cursor is then past it).
inline bool ScanBytes(Reader& r, const char* p, const char* end, ScanState& s) {
  for (; p < end; ++p) {
    const auto b = static_cast<unsigned char>(*p);
    if (s.escaped) {
      s.escaped = false;
    } else if (s.in_string) {
      if (b == '\\') s.escaped = true;
      else if (b == '"') s.in_string = false;
    } else if (kStructural.at[b]) {
      if (b == '"') s.in_string = true;
      else if (b == '{' || b == '[') ++s.depth;
      else if ((b == '}' || b == ']') && --s.depth == 0) {
        r.SetCursor(p + 1);
        return true;
      }
    }
  }
  return false;
}

/// Consumes the object or array starting at the current byte: one tight pass over the window's
/// bytes (refilled at its end), with the state kept across refills. False if the input ends first.
bool SkipContainer(Reader& r) {
  ScanState s;
  char c;
  for (;;) {
    if (!r.Peek(&c)) return false;
    const char* p = r.cursor();
    const char* end = r.end();
#ifdef __SSE2__
    if (ScanBlocks(r, &p, end, s)) return true;
#endif
    if (ScanBytes(r, p, end, s)) return true;
    r.SetCursor(end);
  }
}

/// Consumes one JSON value starting at the current byte (string-aware bracket matching, no full
/// validation: each event is validated when it is parsed). Returns false if the input ends first.
bool SkipValue(Reader& r) {
  char c;
  if (!r.SkipSpace(&c)) return false;
  if (c == '"') {
    r.Next(&c);
    return SkipStringRest(r);
  }
  if (c == '{' || c == '[') return SkipContainer(r);
  // Number or literal: up to the next delimiter.
  for (;;) {
    if (!r.Peek(&c)) return true;  // a bare scalar at the very end
    if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t') return true;
    r.Next(&c);
  }
}

bool ReadEventArray(Reader& r, const StreamCallbacks& cb, StreamStats* stats) {
  char c;
  r.Next(&c);  // '['
  for (;;) {
    if (!r.SkipSpace(&c)) return false;
    if (c == ']') {
      r.Next(&c);
      return true;
    }
    if (c == ',') {
      r.Next(&c);
      continue;
    }
    if (cb.stop && cb.stop()) return true;
    if (c != '{') {
      stats->stop_reason =
          "unexpected '" + std::string(1, c) + "' in the event array at byte " + std::to_string(r.offset());
      return false;
    }
    r.Keep(r.pos());
    if (!SkipValue(r)) return false;
    if (cb.on_event) cb.on_event(r.KeptText());
    ++stats->events;
    r.Release();
  }
}

}  // namespace

Status SplitTraceEvents(const std::string& path, const StreamCallbacks& cb, StreamStats* stats,
                        const ImportLimits& limits) {
  auto fd = OpenInputFile(path);  // regular files only (docs/safety.md)
  if (!fd.ok()) return fd.status();
  struct stat st {};
  uint64_t on_disk = fstat(fd->get(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  gzFile f = gzdopen(fd->release(), "rb");
  if (!f) return IoError(path + ": cannot open: " + std::strerror(errno));
  gzbuffer(f, 1 << 18);
  bool compressed = gzdirect(f) == 0;  // looks at the first bytes: a gzip file starts with 1f 8b
  Reader r(f, path, compressed, on_disk, limits);
  Status limit = Status::Ok();
  auto finish = [&](bool complete) {
    limit = r.limit_error();
    if (!limit.ok()) complete = true;  // reported as the error below, not as damage
    stats->bytes_read = r.bytes_read();
    if (!complete) {
      stats->truncated = true;
      if (stats->stop_reason.empty())
        stats->stop_reason = (r.error().empty() ? "input ends" : "read error (" + r.error() + ")") +
                             " inside the document at byte " + std::to_string(r.offset());
    }
    gzclose(f);
  };
  char c;
  if (!r.SkipSpace(&c)) {
    finish(true);
    if (!limit.ok()) return limit;
    return ParseError(path + ": empty file; expected a JSON trace");
  }
  if (c == '[') {
    bool ok = ReadEventArray(r, cb, stats);
    finish(ok);
    return limit;
  }
  if (c != '{') {
    finish(true);
    return ParseError(path + ":1:1: not a JSON trace (expected '{' or '[')");
  }
  r.Next(&c);
  for (;;) {
    if (!r.SkipSpace(&c)) return finish(false), limit;
    if (c == '}') return finish(true), limit;
    if (c == ',') {
      r.Next(&c);
      continue;
    }
    if (c != '"') {
      stats->stop_reason = "expected a member name at byte " + std::to_string(r.offset());
      return finish(false), limit;
    }
    r.Keep(r.pos());
    if (!SkipValue(r)) return finish(false), limit;
    std::string key(r.KeptText());
    key = key.substr(1, key.size() - 2);
    r.Release();
    if (!r.SkipSpace(&c) || c != ':') {
      if (stats->stop_reason.empty()) stats->stop_reason = "expected ':' at byte " + std::to_string(r.offset());
      return finish(false), limit;
    }
    r.Next(&c);
    if (!r.SkipSpace(&c)) return finish(false), limit;
    if (key == "traceEvents" && c == '[') {
      if (!ReadEventArray(r, cb, stats)) return finish(false), limit;
      if (cb.stop && cb.stop()) return finish(true), limit;
      continue;
    }
    r.Keep(r.pos());
    if (!SkipValue(r)) return finish(false), limit;
    std::string_view value = r.KeptText();
    if (cb.on_member && value.size() <= (64u << 20)) cb.on_member(key, value);
    r.Release();
  }
}

bool HasTopLevelMember(const std::string& path, std::string_view name, const ImportLimits& limits) {
  auto fd = OpenInputFile(path);
  if (!fd.ok()) return false;
  struct stat st {};
  uint64_t on_disk = fstat(fd->get(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  gzFile f = gzdopen(fd->release(), "rb");
  if (!f) return false;
  gzbuffer(f, 1 << 18);
  Reader r(f, path, gzdirect(f) == 0, on_disk, limits);
  bool found = false;
  char c;
  if (r.SkipSpace(&c) && c == '{') {
    r.Next(&c);
    for (;;) {
      if (!r.SkipSpace(&c) || c == '}') break;
      if (c == ',') {
        r.Next(&c);
        continue;
      }
      if (c != '"') break;
      r.Keep(r.pos());
      if (!SkipValue(r)) break;
      std::string key(r.KeptText());
      r.Release();
      if (!r.SkipSpace(&c) || c != ':') break;
      if (key.size() >= 2 && std::string_view(key).substr(1, key.size() - 2) == name) {
        found = true;
        break;
      }
      r.Next(&c);
      if (!SkipValue(r)) break;
    }
  }
  gzclose(f);
  return found;
}

}  // namespace portkit::prof
