#include "tune/landscape.h"

#include <simdjson.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/atomic_file.h"
#include "core/json_writer.h"

namespace portkit::tune {
namespace fs = std::filesystem;

namespace {

std::string HeaderLine(const Landscape& l) {
  std::string out = "{\"kind\": \"landscape\", \"version\": 1, \"validators\": ";
  JsonWriter::AppendEscaped(out, l.validators);
  out += ", \"fix\": [";
  for (size_t i = 0; i < l.fixes.size(); ++i) {
    if (i) out += ", ";
    JsonWriter::AppendEscaped(out, l.fixes[i]);
  }
  return out + "]}\n";
}

std::string OpLine(const OpDesc& op) { return "{\"kind\": \"op\", \"op\": " + OpToJson(op) + "}\n"; }

std::string EvalLine(const std::string& sig, const std::string& key, const LandscapePoint& p) {
  std::string out = "{\"kind\": \"eval\", \"signature\": ";
  JsonWriter::AppendEscaped(out, sig);
  out += ", \"config\": ";
  JsonWriter::AppendEscaped(out, key);
  out += ", \"status\": ";
  JsonWriter::AppendEscaped(out, p.status);
  char t[48];
  std::snprintf(t, sizeof t, "%.17g", p.time_us);
  return out + ", \"time_us\": " + t + "}\n";
}

}  // namespace

void Landscape::AddOp(const OpDesc& op) {
  std::string sig = Signature(op);
  for (const auto& o : ops)
    if (Signature(o) == sig) return;
  ops.push_back(op);
  Append(OpLine(op));
}

void Landscape::Add(const std::string& signature, const std::string& key, const LandscapePoint& p) {
  points[signature][key] = p;
  Append(EvalLine(signature, key, p));
}

Status Landscape::StreamTo(const std::filesystem::path& path) {
  // Checked now (fail fast), opened at the first record: a run that stops before measuring
  // anything does not truncate an existing landscape.
  std::filesystem::path probe = path;
  probe += ".probe" + std::to_string(::getpid());
  FILE* f = std::fopen(probe.c_str(), "w");
  if (!f) return IoError("cannot write the landscape " + path.string() + ": " + std::strerror(errno));
  std::fclose(f);
  std::error_code ec;
  std::filesystem::remove(probe, ec);
  stream_path_ = path;
  stream_file_.clear();
  stream_.reset();
  stream_error_.clear();
  return Status::Ok();
}

bool Landscape::OpenStream() {
  std::error_code ec;
  fs::path target = stream_path_;
  bool append = false;
  if (fs::exists(target, ec)) {
    // Keep what is there: append to a compatible landscape, else write a numbered file beside it.
    std::string text;
    if (auto read = ReadFile(target); read.ok()) text = std::move(*read);
    auto old = ParseLandscape(text, target.string());
    if (old.ok() && old->validators == validators && old->fixes == fixes) {
      append = true;
      std::vector<OpDesc> mine = std::move(ops);
      auto my_points = std::move(points);
      ops = std::move(old->ops);
      points = std::move(old->points);
      for (auto& op : mine) {
        std::string sig = Signature(op);
        bool known = false;
        for (const auto& o : ops) known = known || Signature(o) == sig;
        if (!known) ops.push_back(std::move(op));
      }
      for (auto& [sig, by_key] : my_points)
        for (auto& [key, p] : by_key) points[sig][key] = p;
    } else {
      fs::path stem = target.parent_path() / target.stem();
      std::string ext = target.extension().string();
      for (int n = 1;; ++n) {
        target = stem;
        target += "." + std::to_string(n) + ext;
        if (!fs::exists(target, ec)) break;
      }
    }
  }
  FILE* f = std::fopen(target.c_str(), append ? "a" : "w");
  if (!f) {
    stream_error_ = "cannot write the landscape " + target.string() + ": " + std::strerror(errno);
    return false;
  }
  stream_.reset(f, [](FILE* p) { std::fclose(p); });
  stream_file_ = target;
  if (!append) {
    std::string head = HeaderLine(*this);
    if (std::fwrite(head.data(), 1, head.size(), f) != head.size() || std::fflush(f) != 0) {
      stream_error_ = "cannot write the landscape " + target.string() + ": " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

void Landscape::Append(const std::string& line) {
  if (stream_path_.empty() || !stream_error_.empty()) return;
  if (!stream_ && !OpenStream()) return;
  if (std::fwrite(line.data(), 1, line.size(), stream_.get()) != line.size() || std::fflush(stream_.get()) != 0)
    stream_error_ = "cannot write the landscape " + stream_file_.string() + ": " + std::strerror(errno);
}

std::string Landscape::ToJsonLines() const {
  std::string out = HeaderLine(*this);
  for (const auto& op : ops) out += OpLine(op);
  for (const auto& [sig, by_key] : points)
    for (const auto& [key, p] : by_key) out += EvalLine(sig, key, p);
  return out;
}

Expected<Landscape> ParseLandscape(std::string_view text, std::string_view file) {
  Landscape l;
  l.file = std::string(file);
  simdjson::dom::parser parser;
  size_t line_no = 0, pos = 0;
  bool header = false;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    std::string where = std::string(file) + ":" + std::to_string(line_no);
    simdjson::dom::element e;
    if (parser.parse(simdjson::padded_string(line)).get(e)) return ParseError(where + ": not valid JSON");
    std::string_view kind;
    if (e["kind"].get_string().get(kind)) return ParseError(where + ": kind: missing or not a string");
    if (kind == "landscape") {
      std::string_view v;
      if (e["validators"].get_string().get(v)) return ParseError(where + ": validators: missing or not a string");
      l.validators = std::string(v);
      header = true;
      simdjson::dom::array fixes;
      if (!e["fix"].get_array().get(fixes))
        for (auto f : fixes) {
          std::string_view fs;
          if (f.get_string().get(fs)) return ParseError(where + ": fix: expected strings");
          l.fixes.emplace_back(fs);
        }
    } else if (kind == "op") {
      simdjson::dom::element op;
      if (e["op"].get(op)) return ParseError(where + ": op: missing");
      std::string reason;
      auto desc = ParseOpJson(simdjson::minify(op), where + ": op", &reason);
      if (!desc.ok()) return desc.status();
      if (!reason.empty()) return ParseError(where + ": op: " + reason);
      // An operator recorded again (a landscape appended to by a later run) is listed once.
      std::string sig = Signature(*desc);
      bool known = false;
      for (const auto& o : l.ops) known = known || Signature(o) == sig;
      if (!known) l.ops.push_back(std::move(*desc));
    } else if (kind == "eval") {
      std::string_view sig, key, status;
      double t = 0;
      if (e["signature"].get_string().get(sig)) return ParseError(where + ": signature: missing or not a string");
      if (e["config"].get_string().get(key)) return ParseError(where + ": config: missing or not a string");
      if (e["status"].get_string().get(status)) return ParseError(where + ": status: missing or not a string");
      if (e["time_us"].get_double().get(t)) return ParseError(where + ": time_us: missing or not a number");
      if (status == "ok" && !(t > 0)) return ParseError(where + ": time_us: must be > 0 for status ok");
      l.Add(std::string(sig), std::string(key), {std::string(status), t});
    } else {
      return ParseError(where + ": kind: unknown kind '" + std::string(kind) + "'");
    }
  }
  if (!header) return ParseError(std::string(file) + ": not a landscape file (no {\"kind\": \"landscape\"} line)");
  return l;
}

}  // namespace portkit::tune
