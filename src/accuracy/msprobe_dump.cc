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

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "accuracy/tensor_data_file.h"
#include "core/input_files.h"

namespace portkit::accuracy {
namespace {

/// torch dtype names as msprobe writes them (str(tensor.dtype)) → the safetensors names portkit
/// uses; empty for a dtype portkit does not compare (complex, quantised).
std::string DTypeFromTorch(std::string_view t) {
  static const std::map<std::string_view, std::string_view> kNames = {
      {"torch.float64", "F64"}, {"torch.double", "F64"},  {"torch.float32", "F32"}, {"torch.float", "F32"},
      {"torch.float16", "F16"}, {"torch.half", "F16"},    {"torch.bfloat16", "BF16"},
      {"torch.float8_e4m3fn", "F8_E4M3"}, {"torch.float8_e5m2", "F8_E5M2"},
      {"torch.int64", "I64"},   {"torch.long", "I64"},    {"torch.int32", "I32"},   {"torch.int", "I32"},
      {"torch.int16", "I16"},   {"torch.int8", "I8"},     {"torch.uint8", "U8"},    {"torch.bool", "BOOL"}};
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

/// Adds the tensors under `e` (a tensor record, or a list/tuple/dict of them) with keys
/// `prefix`, `prefix.0`, `prefix.name` ...; other values (ints, None, strings) are not tensors.
void AddTensors(simdjson::dom::element e, const std::string& prefix, DumpOp& op, bool* has_data_files,
                int depth = 0) {
  if (depth > 16) return;
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
    if (!o["type"].error()) return;  // an int, a slice, a dtype ...: not a tensor
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
  return !std::filesystem::exists(dir / "manifest.jsonl", ec) && std::filesystem::is_regular_file(dir / "dump.json", ec);
}

Expected<Dump> LoadMsprobeDump(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "dump.json";
  auto fd = OpenInputFile(file, Links::kRefuse);
  if (!fd.ok()) return fd.status();
  simdjson::padded_string text;
  if (auto err = simdjson::padded_string::load(file.string()).get(text))
    return IoError(file.string() + ": cannot read (" + simdjson::error_message(err) + ")");
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(text).get(root))
    return ParseError(file.string() + ": not valid JSON (" + simdjson::error_message(err) + ")");
  simdjson::dom::object data;
  if (root["data"].get_object().get(data))
    return ParseError(file.string() + ": no \"data\" object; not an msprobe dump.json");
  std::string_view task;
  if (root["task"].get_string().get(task)) task = "";
  Dump d;
  d.dir = dir;
  bool data_files = false;
  std::vector<std::string> odd;
  int64_t index = 0;
  for (auto [key, value] : data) {
    DumpOp op;
    std::string k(key);
    if (!SplitCallName(k, op)) {
      if (odd.size() < 3) odd.push_back(k);
      continue;
    }
    op.index = index++;
    op.call = k;
    simdjson::dom::object call;
    if (value.get_object().get(call)) continue;
    for (auto [part, v] : call) {
      if (part == "input_args" || part == "input") AddTensors(v, "input", op, &data_files);
      else if (part == "input_kwargs") AddTensors(v, "input", op, &data_files);
      else if (part == "output") AddTensors(v, "output", op, &data_files);
    }
    // msprobe has no overflow flag per call: a non-finite output statistic is one.
    for (const auto& t : op.tensors)
      if (t.key.rfind("output", 0) == 0 && t.NonFinite()) op.overflow = true;
    d.ops.push_back(std::move(op));
  }
  if (!odd.empty())
    d.warning = file.string() + ": " + std::to_string(odd.size()) + "+ entries with no API.N.phase name skipped (first: " +
                odd.front() + ")";
  std::error_code ec;
  const std::filesystem::path data_dir = dir / kTensorDataFolder.substr(0, kTensorDataFolder.size() - 1);
  const bool data_link = std::filesystem::is_symlink(std::filesystem::symlink_status(data_dir, ec));
  if (data_files && !data_link && std::filesystem::is_directory(std::filesystem::symlink_status(data_dir, ec))) {
    // Tensor mode: each tensor's data is its own file in dump_tensor_data/ (TensorDataPath).
    for (auto& op : d.ops)
      if (std::any_of(op.tensors.begin(), op.tensors.end(), [](const DumpTensor& t) { return !t.data_name.empty(); }))
        op.file = std::string(kTensorDataFolder);
  } else if (data_files || task == "tensor") {
    std::string note = data_link ? data_dir.string() + ": is a symbolic link; not followed: compared by the "
                                   "statistics in dump.json"
                                 : file.string() + ": msprobe tensor mode without a " + std::string(kTensorDataFolder) +
                                   " folder beside it: compared by the statistics in dump.json";
    d.warning = d.warning.empty() ? note : d.warning + "; " + note;
  }
  d.ops.shrink_to_fit();
  return d;
}

}  // namespace portkit::accuracy
