// Reads a dump written by msprobe (mindstudio-probe) for PyTorch: one `stepN/rankR/` folder with
// its dump.json. FORMATS.md §5. Every API or module call in `data` (in the order msprobe wrote
// it, which is the order of execution) becomes one operator; its tensors (input_args,
// input_kwargs, input, output, nested lists flattened) carry msprobe's statistics (Max, Min,
// Mean, Norm) and, in md5 mode, its checksum. In tensor mode each tensor names its data file
// (`data_name`, in `dump_tensor_data/`: a torch.save .pt or a .npy): the operators then get
// kTensorDataFolder as their file and compare reads the tensors from those files
// (tensor_data_file.h); a missing or unreadable one is a read error of that row. Without a
// dump_tensor_data/ folder the dump is compared by its statistics, and the load says so.
#include "accuracy/msprobe_dump.h"

#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>

#include "accuracy/dtype.h"
#include "accuracy/tensor_data_file.h"
#include "core/input_files.h"

namespace portkit::accuracy {
namespace {

/// torch dtype names as msprobe writes them (str(tensor.dtype)) → the safetensors names portkit
/// uses; empty for a dtype portkit does not compare (complex, quantised).
std::string DTypeFromTorch(std::string_view t) {
  static const std::map<std::string_view, std::string_view> kNames = {{"torch.float64", "F64"},
                                                                      {"torch.double", "F64"},
                                                                      {"torch.float32", "F32"},
                                                                      {"torch.float", "F32"},
                                                                      {"torch.float16", "F16"},
                                                                      {"torch.half", "F16"},
                                                                      {"torch.bfloat16", "BF16"},
                                                                      {"torch.float8_e4m3fn", "F8_E4M3"},
                                                                      {"torch.float8_e5m2", "F8_E5M2"},
                                                                      {"torch.int64", "I64"},
                                                                      {"torch.long", "I64"},
                                                                      {"torch.int32", "I32"},
                                                                      {"torch.int", "I32"},
                                                                      {"torch.int16", "I16"},
                                                                      {"torch.int8", "I8"},
                                                                      {"torch.uint8", "U8"},
                                                                      {"torch.bool", "BOOL"}};
  auto it = kNames.find(t);
  return it == kNames.end() ? std::string() : std::string(it->second);
}

/// A statistic: a number, or null (msprobe's value for empty or non-float tensors) → false.
bool Stat(simdjson::dom::element e, double* out) {
  if (e.is_double()) return *out = e.get_double().value_unsafe(), true;
  if (e.is_int64()) return *out = static_cast<double>(e.get_int64().value_unsafe()), true;
  if (e.is_uint64()) return *out = static_cast<double>(e.get_uint64().value_unsafe()), true;
  if (e.is_string()) {
    std::string_view s = e.get_string().value_unsafe();
    if (s == "nan" || s == "NaN") return *out = NAN, true;
    if (s == "inf" || s == "Infinity") return *out = INFINITY, true;
    if (s == "-inf" || s == "-Infinity") return *out = -INFINITY, true;
  }
  return false;
}

/// A non-tensor value as Python prints it: True / False, 3, 0.5, a string as it is, None;
/// anything else (a slice's list) as its JSON text.
std::string ScalarText(simdjson::simdjson_result<simdjson::dom::element> value) {
  simdjson::dom::element v;
  if (value.get(v)) return "None";
  bool b;
  int64_t i;
  uint64_t u;
  double d;
  std::string_view s;
  if (!v.get_bool().get(b)) return b ? "True" : "False";
  if (!v.get_int64().get(i)) return std::to_string(i);
  if (!v.get_uint64().get(u)) return std::to_string(u);
  if (!v.get_double().get(d)) return PythonFloatRepr(d);
  if (!v.get_string().get(s)) return std::string(s);
  if (v.is_null()) return "None";
  return simdjson::minify(v);
}

/// Adds the tensors under `e` (a tensor record, or a list/tuple/dict of them) with keys
/// `prefix`, `prefix.0`, `prefix.name` ...; other values (ints, None, strings) are not tensors:
/// they go to op.scalars, for msprobe's compare layout.
void AddTensors(simdjson::dom::element e, const std::string& prefix, DumpOp& op, bool* has_data_files, int depth = 0) {
  if (depth > 16) return;
  if (e.is_null()) {  // an argument or result that was None
    op.scalars.push_back({prefix, "", "None", op.tensors.size()});
    return;
  }
  simdjson::dom::array items;
  if (!e.get_array().get(items)) {
    size_t i = 0;
    for (auto item : items) AddTensors(item, prefix + "." + std::to_string(i++), op, has_data_files, depth + 1);
    return;
  }
  simdjson::dom::object o;
  if (e.get_object().get(o)) return;
  std::string_view type;
  if (o["type"].get_string().get(type) || type != "torch.Tensor") {
    if (!o["type"].error()) {  // an int, a slice, a dtype ...: not a tensor, listed as msprobe lists it
      op.scalars.push_back({prefix, std::string(type), ScalarText(o["value"]), op.tensors.size()});
      return;
    }
    for (auto [k, v] : o) AddTensors(v, prefix + "." + std::string(k), op, has_data_files, depth + 1);  // a kwargs dict
    return;
  }
  DumpTensor t;
  t.key = prefix;
  std::string_view s;
  if (!o["dtype"].get_string().get(s)) {
    t.dtype = DTypeFromTorch(s);
    if (t.dtype.empty()) t.note = "dtype " + std::string(s) + " is not compared";
  }
  simdjson::dom::array shape;
  if (!o["shape"].get_array().get(shape))
    for (auto d : shape) {
      int64_t v;
      if (!d.get_int64().get(v)) t.shape.push_back(v);
    }
  double x;
  simdjson::dom::element v;
  if (!o["Max"].get(v) && Stat(v, &x)) {
    t.integral_stats = v.is_int64() || v.is_uint64();
    t.max = x;
    t.has_stats = true;
    if (!o["Min"].get(v) && Stat(v, &x)) t.min = x;
    if (!o["Mean"].get(v) && Stat(v, &x)) t.mean = x;
    if (!o["Norm"].get(v) && Stat(v, &x)) t.norm = x;
  }
  // md5 mode: msprobe's "md5" is the CRC-32 of the tensor's bytes, 8 hex digits.
  if (!o["md5"].get_string().get(s) && s.size() == 8 &&
      std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
    t.crc32 = static_cast<int64_t>(std::stoull(std::string(s), nullptr, 16));
  if (!o["data_name"].get_string().get(s) && !s.empty()) *has_data_files = true, t.data_name = s;
  bool grad;
  if (!o["requires_grad"].get_bool().get(grad)) t.requires_grad = grad ? 1 : 0;
  op.tensors.push_back(std::move(t));
}

/// "Functional.conv2d.0.forward" → (Functional.conv2d, forward); "Module.layer1.0.Conv2d.forward.0"
/// → (Module.layer1.0.Conv2d, forward); kind = the first part.
bool SplitCallName(const std::string& key, DumpOp& op) {
  std::vector<std::string> parts;
  for (size_t at = 0;;) {
    size_t dot = key.find('.', at);
    parts.push_back(key.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
    if (dot == std::string::npos) break;
    at = dot + 1;
  }
  if (parts.size() < 3) return false;
  auto is_phase = [](const std::string& p) { return p == "forward" || p == "backward"; };
  auto is_number = [](const std::string& p) {
    return !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  size_t n = parts.size();
  size_t name_end;
  if (is_phase(parts[n - 1]) && is_number(parts[n - 2])) {
    op.phase = parts[n - 1];
    name_end = n - 2;  // Prefix.api.N.phase
  } else if (is_number(parts[n - 1]) && is_phase(parts[n - 2])) {
    op.phase = parts[n - 2];
    name_end = n - 2;  // Module.path.Class.phase.N
  } else {
    return false;
  }
  op.kind = parts[0];
  op.name.clear();
  for (size_t i = 0; i < name_end; ++i) op.name += (i ? "." : "") + parts[i];
  // "Module.<path>.<Class>" → its module path; a bare "Module.forward.0" names none.
  if (op.kind == "Module" && op.name.size() > 7) op.module = op.name.substr(7);
  return true;
}

}  // namespace

bool IsMsprobeDump(const std::filesystem::path& dir) {
  std::error_code ec;
  return !std::filesystem::exists(dir / "manifest.jsonl", ec) &&
         std::filesystem::is_regular_file(dir / "dump.json", ec);
}

/// The bytes of a file read forward through a 1 MiB buffer, with the JSON scanning the reader
/// needs: whitespace, one value's extent (objects and arrays by depth, strings by their quotes
/// and escapes), single characters. Every value captured is checked against a cap as it grows.
class JsonBytes {
 public:
  JsonBytes(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)), buf_(kBufferBytes, '\0') {}

  /// The next byte, -1 at the end of the file (or after a read error, kept in io_error()).
  int Peek() {
    if (pos_ == len_ && !Fill()) return -1;
    return static_cast<unsigned char>(buf_[pos_]);
  }
  void Advance() { ++pos_; }
  uint64_t Offset() const { return base_ + pos_; }
  const std::string& io_error() const { return io_error_; }

  void SkipSpace() {
    for (int c = Peek(); c == ' ' || c == '\n' || c == '\r' || c == '\t'; c = Peek()) Advance();
  }
  /// Consumes `c` (after whitespace) if it comes next.
  bool Eat(char c) {
    SkipSpace();
    if (Peek() != static_cast<unsigned char>(c)) return false;
    Advance();
    return true;
  }

  /// Consumes one JSON value (after whitespace), appending its text to `out` unless null. Its
  /// structure is checked only as far as its extent needs (brackets balanced, strings closed):
  /// the parse of the captured text checks the rest. Errors name the file and the byte; going
  /// over `max_bytes` names `call_at` (where the call began) when given.
  Status Value(std::string* out, uint64_t max_bytes, uint64_t call_at = UINT64_MAX) {
    SkipSpace();
    const uint64_t at = Offset();
    const uint64_t limit_at = call_at != UINT64_MAX ? call_at : at;
    int depth = 0;
    bool in_string = false, escape = false;
    std::string stack;  // the open brackets, to match each close
    for (;;) {
      int c = Peek();
      if (c < 0) return Broken(at, "ends inside a value");
      if (out) {
        if (max_bytes && out->size() >= max_bytes) return OverTheLimit(limit_at, max_bytes);
        out->push_back(static_cast<char>(c));
      }
      Advance();
      if (in_string) {
        if (escape) escape = false;
        else if (c == '\\') escape = true;
        else if (c == '"') {
          in_string = false;
          if (depth == 0) return Status::Ok();
        }
        continue;
      }
      if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        if (++depth > 1024) return Broken(at, "nested more than 1024 levels deep");
        stack.push_back(static_cast<char>(c));
      } else if (c == '}' || c == ']') {
        if (depth == 0 || stack.back() != (c == '}' ? '{' : '['))
          return Broken(Offset() - 1, "a stray '" + std::string(1, static_cast<char>(c)) + "'");
        stack.pop_back();
        if (--depth == 0) return Status::Ok();
      } else if (depth == 0) {
        // A scalar (number, true, false, null): up to the next delimiter.
        for (int n = Peek();
             n >= 0 && n != ',' && n != '}' && n != ']' && n != ' ' && n != '\n' && n != '\r' && n != '\t';
             n = Peek()) {
          if (out) {
            if (max_bytes && out->size() >= max_bytes) return OverTheLimit(limit_at, max_bytes);
            out->push_back(static_cast<char>(n));
          }
          Advance();
        }
        return Status::Ok();
      }
    }
  }

  Status Broken(uint64_t at, const std::string& what) const {
    if (!io_error_.empty()) return IoError(path_ + ": " + io_error_);
    return ParseError(path_ + ": not valid JSON: " + what + " at byte " + std::to_string(at) +
                      (eof_ ? " (the file ends at byte " + std::to_string(Offset()) + ": truncated?)" : ""));
  }

 private:
  static constexpr size_t kBufferBytes = size_t{1} << 20;

  Status OverTheLimit(uint64_t at, uint64_t max_bytes) const {
    const std::string cap = max_bytes % (uint64_t{1} << 20) == 0 ? std::to_string(max_bytes >> 20) + " MiB"
                                                                 : std::to_string(max_bytes) + " bytes";
    return InvalidArgument(path_ + ": over the limit: the call at byte " + std::to_string(at) + " is larger than " +
                           cap + " of JSON; not read. --max-call-mb raises the limit");
  }
  bool Fill() {
    if (eof_) return false;
    base_ += len_;
    pos_ = len_ = 0;
    for (;;) {
      ssize_t n = ::read(fd_.get(), buf_.data(), buf_.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) io_error_ = std::string("cannot read: ") + std::strerror(errno);
      if (n <= 0) {
        eof_ = true;
        return false;
      }
      len_ = static_cast<size_t>(n);
      return true;
    }
  }

  UniqueFd fd_;
  std::string path_;
  std::string buf_;
  size_t pos_ = 0, len_ = 0;
  uint64_t base_ = 0;
  bool eof_ = false;
  std::string io_error_;
};

struct MsprobeDumpReader::State {
  State(JsonBytes b) : bytes(std::move(b)) {}
  std::filesystem::path dir, file;
  JsonBytes bytes;
  uint64_t max_call_bytes = 0;
  simdjson::dom::parser parser;
  std::string piece;  // one member's text, wrapped as an object
  bool data_started = false, data_done = false, done = false;
  bool data_files = false;  // a tensor named a data file
  bool data_dir_usable = false, data_dir_link = false;
  std::string task;
  std::vector<std::string> odd;  // the first call names that are not API.N.phase
  size_t odd_count = 0;
  int64_t index = 0;
  std::string warning;

  /// One top-level member other than "data" (the reader is at its key): "task" is kept, the
  /// rest skipped without being held.
  Status TopLevelMember(bool* is_data) {
    *is_data = false;
    piece.clear();
    if (bytes.Peek() != '"') return bytes.Broken(bytes.Offset(), "a member name expected");
    if (Status st = bytes.Value(&piece, 4096); !st.ok()) return st;
    if (!bytes.Eat(':')) return bytes.Broken(bytes.Offset(), "':' expected");
    if (piece == "\"data\"") {
      if (!bytes.Eat('{')) return ParseError(file.string() + ": no \"data\" object; not an msprobe dump.json");
      *is_data = true;
      return Status::Ok();
    }
    const bool is_task = piece == "\"task\"";
    piece.clear();
    if (Status st = bytes.Value(is_task ? &piece : nullptr, 4096); !st.ok()) return st;
    std::string_view t;
    simdjson::padded_string json(piece);
    if (is_task && !parser.parse(json).get_string().get(t)) task = t;
    return Status::Ok();
  }

  /// After a member: ',' (true: another follows) or the object's '}' (false).
  Expected<bool> MemberEnd() {
    if (bytes.Eat(',')) return true;
    if (bytes.Eat('}')) return false;
    return bytes.Broken(bytes.Offset(), "',' or '}' expected");
  }

  /// The members after "data" and the end of the document; then the warnings.
  Status Finish() {
    auto more = MemberEnd();
    if (!more.ok()) return more.status();
    while (*more) {
      bytes.SkipSpace();
      bool is_data = false;
      if (Status st = TopLevelMember(&is_data); !st.ok()) return st;
      if (is_data) return ParseError(file.string() + ": two \"data\" objects");
      more = MemberEnd();
      if (!more.ok()) return more.status();
    }
    bytes.SkipSpace();
    if (bytes.Peek() >= 0) return bytes.Broken(bytes.Offset(), "text after the end of the document");
    if (!bytes.io_error().empty()) return IoError(file.string() + ": " + bytes.io_error());
    if (odd_count > 0)
      warning = file.string() + ": " + std::to_string(odd_count) +
                " entries with no API.N.phase name skipped (first: " + odd.front() + ")";
    if (!data_dir_usable && (data_files || task == "tensor")) {
      const std::filesystem::path data_dir = dir / kTensorDataFolder.substr(0, kTensorDataFolder.size() - 1);
      std::string note = data_dir_link
                             ? data_dir.string() +
                                   ": is a symbolic link; not followed: compared by the "
                                   "statistics in dump.json"
                             : file.string() + ": msprobe tensor mode without a " + std::string(kTensorDataFolder) +
                                   " folder beside it: compared by the statistics in dump.json";
      warning = warning.empty() ? note : warning + "; " + note;
    }
    done = true;
    return Status::Ok();
  }
};

MsprobeDumpReader::MsprobeDumpReader(std::unique_ptr<State> state) : s_(std::move(state)) {}
MsprobeDumpReader::MsprobeDumpReader(MsprobeDumpReader&&) noexcept = default;
MsprobeDumpReader& MsprobeDumpReader::operator=(MsprobeDumpReader&&) noexcept = default;
MsprobeDumpReader::~MsprobeDumpReader() = default;
const std::string& MsprobeDumpReader::warning() const { return s_->warning; }

Expected<MsprobeDumpReader> MsprobeDumpReader::Open(const std::filesystem::path& dir, uint64_t max_call_bytes) {
  const std::filesystem::path file = dir / "dump.json";
  auto fd = OpenInputFile(file, Links::kRefuse);
  if (!fd.ok()) return fd.status();
  auto s = std::make_unique<State>(JsonBytes(std::move(*fd), file.string()));
  s->dir = dir, s->file = file, s->max_call_bytes = max_call_bytes;
  std::error_code ec;
  const std::filesystem::path data_dir = dir / kTensorDataFolder.substr(0, kTensorDataFolder.size() - 1);
  s->data_dir_link = std::filesystem::is_symlink(std::filesystem::symlink_status(data_dir, ec));
  s->data_dir_usable =
      !s->data_dir_link && std::filesystem::is_directory(std::filesystem::symlink_status(data_dir, ec));
  JsonBytes& b = s->bytes;
  if (!b.Eat('{')) {
    if (!b.io_error().empty()) return IoError(file.string() + ": " + b.io_error());
    return ParseError(file.string() + ": not valid JSON: not an object; not an msprobe dump.json");
  }
  // The members before "data" ("task", "level", "dump_data_dir", ...).
  for (bool first = true;; first = false) {
    if (!first) {
      auto more = s->MemberEnd();
      if (!more.ok()) return more.status();
      if (!*more) return ParseError(file.string() + ": no \"data\" object; not an msprobe dump.json");
    } else if (b.Eat('}')) {
      return ParseError(file.string() + ": no \"data\" object; not an msprobe dump.json");
    }
    b.SkipSpace();
    bool is_data = false;
    if (Status st = s->TopLevelMember(&is_data); !st.ok()) return st;
    if (is_data) break;
  }
  return MsprobeDumpReader(std::move(s));
}

Expected<bool> MsprobeDumpReader::Next(DumpOp& op) {
  State& st = *s_;
  JsonBytes& b = st.bytes;
  while (!st.done) {
    if (st.data_done) {
      if (Status status = st.Finish(); !status.ok()) return status;
      return false;
    }
    // One member of "data": `"Call.name.N.phase": {...}`, parsed on its own as `{member}`.
    if (!st.data_started && b.Eat('}')) {  // an empty "data"
      st.data_done = true;
      continue;
    }
    st.data_started = true;
    b.SkipSpace();
    const uint64_t at = b.Offset();
    st.piece.assign(1, '{');
    if (b.Peek() != '"') return b.Broken(at, "a call name expected");
    if (Status status = b.Value(&st.piece, st.max_call_bytes, at); !status.ok()) return status;
    if (!b.Eat(':')) return b.Broken(b.Offset(), "':' expected");
    st.piece.push_back(':');
    if (Status status = b.Value(&st.piece, st.max_call_bytes, at); !status.ok()) return status;
    st.piece.push_back('}');
    auto more = st.MemberEnd();
    if (!more.ok()) return more.status();
    st.data_done = !*more;
    simdjson::dom::object member;
    if (auto err = st.parser.parse(st.piece).get_object().get(member))
      return ParseError(st.file.string() + ": not valid JSON: the call at byte " + std::to_string(at) + " (" +
                        simdjson::error_message(err) + ")");
    for (auto [key, value] : member) {
      op = DumpOp();
      std::string k(key);
      if (!SplitCallName(k, op)) {
        if (st.odd.size() < 3) st.odd.push_back(k);
        ++st.odd_count;
        break;
      }
      op.index = st.index++;
      op.call = k;
      simdjson::dom::object call;
      if (value.get_object().get(call)) break;
      bool data_files = false;
      for (auto [part, v] : call) {
        if (part == "input_args" || part == "input") AddTensors(v, "input", op, &data_files);
        else if (part == "input_kwargs") AddTensors(v, "input", op, &data_files);
        else if (part == "output") AddTensors(v, "output", op, &data_files);
      }
      // msprobe has no overflow flag per call: a non-finite output statistic is one.
      for (const auto& t : op.tensors)
        if (t.key.rfind("output", 0) == 0 && t.NonFinite()) op.overflow = true;
      // Tensor mode: each tensor's data is its own file in dump_tensor_data/ (TensorDataPath).
      st.data_files = st.data_files || data_files;
      if (data_files && st.data_dir_usable) op.file = std::string(kTensorDataFolder);
      op.tensors.shrink_to_fit();
      return true;
    }
  }
  return false;
}

Expected<std::map<std::string, std::vector<std::string>>> LoadMsprobeStacks(const std::filesystem::path& dir,
                                                                            uint64_t max_bytes) {
  std::map<std::string, std::vector<std::string>> stacks;
  const std::filesystem::path file = dir / "stack.json";
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(file, ec))) return stacks;
  auto fd = OpenInputFile(file, Links::kRefuse);
  if (!fd.ok()) return fd.status();
  std::string text;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd->get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError(file.string() + ": cannot read: " + std::strerror(errno));
    if (n == 0) break;
    if (max_bytes && text.size() + static_cast<size_t>(n) > max_bytes)
      return InvalidArgument(file.string() + ": over the limit: larger than " + std::to_string(max_bytes >> 20) +
                             " MiB; not read");
    text.append(buf, static_cast<size_t>(n));
  }
  simdjson::dom::parser parser;
  simdjson::dom::object doc;
  if (auto err = parser.parse(text).get_object().get(doc))
    return ParseError(file.string() + ": not valid JSON: " + simdjson::error_message(err));
  // msprobe 26: {"<id>": [[call names], [stack lines]]}; older ones: {"<call name>": [stack lines]}.
  auto lines_of = [](simdjson::dom::array a) {
    std::vector<std::string> lines;
    for (auto l : a) {
      std::string_view s;
      if (!l.get_string().get(s)) lines.emplace_back(s);
    }
    return lines;
  };
  for (auto [key, value] : doc) {
    simdjson::dom::array entry;
    if (value.get_array().get(entry)) continue;
    simdjson::dom::array calls, lines;
    if (entry.size() == 2 && !entry.at(0).get_array().get(calls) && !entry.at(1).get_array().get(lines)) {
      std::vector<std::string> text_lines = lines_of(lines);
      for (auto c : calls) {
        std::string_view call;
        if (!c.get_string().get(call)) stacks[std::string(call)] = text_lines;
      }
    } else {
      stacks[std::string(key)] = lines_of(entry);
    }
  }
  return stacks;
}

Expected<Dump> LoadMsprobeDump(const std::filesystem::path& dir, uint64_t max_call_bytes) {
  auto reader = MsprobeDumpReader::Open(dir, max_call_bytes);
  if (!reader.ok()) return reader.status();
  Dump d;
  d.dir = dir;
  PORTKIT_RETURN_IF_ERROR(ReadAllOps(*reader, d));
  return d;
}

}  // namespace portkit::accuracy
