#include "prof/json_stream.h"

#include <zlib.h>

#include <cstring>
#include <vector>

#include "core/input_files.h"

namespace portkit::prof {
namespace {

/// Buffered reader over gzFile with a sliding window the scanner can keep text in.
class Reader {
 public:
  explicit Reader(gzFile f) : f_(f) { buf_.reserve(1 << 20); }
  /// Makes at least one more byte available at pos_; false at end of input or on error.
  bool Fill() {
    if (pos_ < buf_.size()) return true;
    // Drop everything before the oldest byte still needed (keep_).
    size_t drop = std::min(keep_, pos_);
    if (drop > 0) {
      buf_.erase(0, drop);
      pos_ -= drop;
      keep_ -= drop;
      base_ += drop;
    }
    char chunk[1 << 16];
    int n = gzread(f_, chunk, sizeof chunk);
    if (n <= 0) {
      int err = 0;
      const char* msg = gzerror(f_, &err);
      if (n < 0 || (err != Z_OK && err != Z_STREAM_END)) error_ = msg ? msg : "read error";
      return false;
    }
    buf_.append(chunk, static_cast<size_t>(n));
    read_ += static_cast<uint64_t>(n);
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
    while (p < end) {
      char c = *p;
      if (c == '"' || c == '\\' || c == '{' || c == '}' || c == '[' || c == ']') break;
      ++p;
    }
    pos_ = static_cast<size_t>(p - buf_.data());
  }
  /// Advances to the next quote or backslash (inside a string).
  void SkipStringBody() {
    const char* p = buf_.data() + pos_;
    const char* end = buf_.data() + buf_.size();
    while (p < end && *p != '"' && *p != '\\') ++p;
    pos_ = static_cast<size_t>(p - buf_.data());
  }
  size_t pos() const { return pos_; }
  void Keep(size_t from) { keep_ = from; }
  void Release() { keep_ = pos_; }
  /// The bytes from the Keep() mark to the current position (the mark moves with the window).
  std::string_view KeptText() const { return std::string_view(buf_).substr(keep_, pos_ - keep_); }
  uint64_t offset() const { return base_ + pos_; }
  uint64_t bytes_read() const { return read_; }
  const std::string& error() const { return error_; }

 private:
  gzFile f_;
  std::string buf_;
  size_t pos_ = 0, keep_ = 0;
  uint64_t base_ = 0, read_ = 0;
  std::string error_;
};

/// Consumes one JSON value starting at the current byte (string-aware bracket matching, no full
/// validation: each event is validated when it is parsed). Returns false if the input ends first.
bool SkipValue(Reader& r) {
  char c;
  if (!r.SkipSpace(&c)) return false;
  if (c == '"') {
    r.Next(&c);
    for (;;) {
      if (!r.Next(&c)) return false;
      if (c == '\\') {
        if (!r.Next(&c)) return false;
      } else if (c == '"') {
        return true;
      }
    }
  }
  if (c == '{' || c == '[') {
    int depth = 0;
    bool in_string = false;
    for (;;) {
      if (in_string) r.SkipStringBody();
      else r.SkipPlain();
      if (!r.Next(&c)) return false;
      if (in_string) {
        if (c == '\\') {
          if (!r.Next(&c)) return false;
        } else if (c == '"') {
          in_string = false;
        }
        continue;
      }
      if (c == '"') in_string = true;
      else if (c == '{' || c == '[') ++depth;
      else if (c == '}' || c == ']') {
        if (--depth == 0) return true;
      }
    }
  }
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
    if (c != '{') {
      stats->stop_reason = "unexpected '" + std::string(1, c) + "' in the event array at byte " +
                           std::to_string(r.offset());
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

Status SplitTraceEvents(const std::string& path, const StreamCallbacks& cb, StreamStats* stats) {
  auto fd = OpenInputFile(path);  // regular files only (docs/safety.md)
  if (!fd.ok()) return fd.status();
  gzFile f = gzdopen(fd->release(), "rb");
  if (!f) return IoError(path + ": cannot open: " + std::strerror(errno));
  gzbuffer(f, 1 << 18);
  Reader r(f);
  auto finish = [&](bool complete) {
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
    return ParseError(path + ": empty file; expected a JSON trace");
  }
  if (c == '[') {
    bool ok = ReadEventArray(r, cb, stats);
    finish(ok);
    return Status::Ok();
  }
  if (c != '{') {
    finish(true);
    return ParseError(path + ":1:1: not a JSON trace (expected '{' or '[')");
  }
  r.Next(&c);
  for (;;) {
    if (!r.SkipSpace(&c)) return finish(false), Status::Ok();
    if (c == '}') return finish(true), Status::Ok();
    if (c == ',') {
      r.Next(&c);
      continue;
    }
    if (c != '"') {
      stats->stop_reason = "expected a member name at byte " + std::to_string(r.offset());
      return finish(false), Status::Ok();
    }
    r.Keep(r.pos());
    if (!SkipValue(r)) return finish(false), Status::Ok();
    std::string key(r.KeptText());
    key = key.substr(1, key.size() - 2);
    r.Release();
    if (!r.SkipSpace(&c) || c != ':') {
      if (stats->stop_reason.empty()) stats->stop_reason = "expected ':' at byte " + std::to_string(r.offset());
      return finish(false), Status::Ok();
    }
    r.Next(&c);
    if (!r.SkipSpace(&c)) return finish(false), Status::Ok();
    if (key == "traceEvents" && c == '[') {
      if (!ReadEventArray(r, cb, stats)) return finish(false), Status::Ok();
      continue;
    }
    r.Keep(r.pos());
    if (!SkipValue(r)) return finish(false), Status::Ok();
    std::string_view value = r.KeptText();
    if (cb.on_member && value.size() <= (64u << 20)) cb.on_member(key, value);
    r.Release();
  }
}

}  // namespace portkit::prof
