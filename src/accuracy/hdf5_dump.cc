#include "accuracy/hdf5_dump.h"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>

#include "accuracy/hdf5_types.h"
#include "core/input_files.h"
#include "core/subprocess.h"

static_assert(sizeof(hid_t) == sizeof(int64_t), "hid_t is kept as int64_t in hdf5_dump.h");

namespace portkit::accuracy {
namespace fs = std::filesystem;
namespace {

/// Owns an HDF5 identifier and closes it with the matching H5?close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      Reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = -1;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  ~Handle() { Reset(); }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  /// Closes now; false when closing failed (a file whose data could not be flushed).
  bool Close() {
    bool ok = true;
    if (id_ >= 0 && close_) ok = close_(id_) >= 0;
    id_ = -1;
    return ok;
  }

 private:
  void Reset() { Close(); }
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

/// For the lifetime of the object, HDF5 does not print its error stack; the descriptions of the
/// last failing call are kept for the message instead. The previous handler is restored after.
class ErrorCapture {
 public:
  ErrorCapture() {
    H5Eget_auto2(H5E_DEFAULT, &old_func_, &old_data_);
    H5Eset_auto2(H5E_DEFAULT, &ErrorCapture::OnError, this);
  }
  ~ErrorCapture() { H5Eset_auto2(H5E_DEFAULT, old_func_, old_data_); }
  ErrorCapture(const ErrorCapture&) = delete;
  ErrorCapture& operator=(const ErrorCapture&) = delete;

  /// ` (outermost description: innermost description)` for the last failure, or empty.
  std::string Detail() {
    std::string d;
    if (!descs_.empty()) {
      d = " (" + descs_.front();
      if (descs_.size() > 1 && descs_.back() != descs_.front()) d += ": " + descs_.back();
      d += ")";
    }
    descs_.clear();
    return d;
  }

 private:
  static herr_t OnError(hid_t stack, void* self) {
    auto* cap = static_cast<ErrorCapture*>(self);
    cap->descs_.clear();
    H5Ewalk2(stack, H5E_WALK_DOWNWARD, &ErrorCapture::Walk, cap);
    return 0;
  }
  static herr_t Walk(unsigned, const H5E_error2_t* e, void* self) {
    auto* cap = static_cast<ErrorCapture*>(self);
    if (e && e->desc && *e->desc) cap->descs_.emplace_back(e->desc);
    return 0;
  }

  H5E_auto2_t old_func_ = nullptr;
  void* old_data_ = nullptr;
  std::vector<std::string> descs_;
};

std::string Where(const fs::path& file, const std::string& object) {
  return file.string() + ": " + PrintableName(object);
}

enum class Kind { kGroup, kDataset, kOther, kLink };

Kind ChildKind(hid_t parent, const std::string& name) {
  H5L_info_t li;
  if (H5Lget_info(parent, name.c_str(), &li, H5P_DEFAULT) < 0) return Kind::kOther;
  if (li.type != H5L_TYPE_HARD) return Kind::kLink;
  Handle obj(H5Oopen(parent, name.c_str(), H5P_DEFAULT), H5Oclose);
  if (!obj.ok()) return Kind::kOther;
  switch (H5Iget_type(obj.get())) {
    case H5I_GROUP: return Kind::kGroup;
    case H5I_DATASET: return Kind::kDataset;
    default: return Kind::kOther;
  }
}

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kGroup: return "a group";
    case Kind::kDataset: return "a dataset";
    case Kind::kLink: return "a soft or external link (not followed)";
    case Kind::kOther: return "a named datatype or unreadable object";
  }
  return "?";
}

/// Link names of a group: creation order when the group indexes it, else natural name order.
Expected<std::vector<std::string>> ChildNames(hid_t group, const std::string& where, bool allow_creation_order,
                                              ErrorCapture& cap) {
  H5G_info_t info;
  if (H5Gget_info(group, &info) < 0) return ParseError(where + ": cannot list the group" + cap.Detail());
  H5_index_t index = H5_INDEX_NAME;
  if (allow_creation_order) {
    Handle gcpl(H5Gget_create_plist(group), H5Pclose);
    unsigned flags = 0;
    if (gcpl.ok() && H5Pget_link_creation_order(gcpl.get(), &flags) >= 0 && (flags & H5P_CRT_ORDER_INDEXED))
      index = H5_INDEX_CRT_ORDER;
  }
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    ssize_t n = H5Lget_name_by_idx(group, ".", index, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (n < 0) return ParseError(where + ": cannot read link " + std::to_string(i) + cap.Detail());
    std::string name(static_cast<size_t>(n) + 1, '\0');
    if (H5Lget_name_by_idx(group, ".", index, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT) < 0)
      return ParseError(where + ": cannot read link " + std::to_string(i) + cap.Detail());
    name.resize(static_cast<size_t>(n));
    names.push_back(std::move(name));
  }
  if (index == H5_INDEX_NAME) std::sort(names.begin(), names.end(), NaturalLess);
  return names;
}

std::string ClassName(H5T_class_t c) {
  switch (c) {
    case H5T_TIME: return "time";
    case H5T_STRING: return "string";
    case H5T_BITFIELD: return "bitfield";
    case H5T_COMPOUND: return "compound";
    case H5T_REFERENCE: return "reference";
    case H5T_VLEN: return "variable-length";
    case H5T_ARRAY: return "array";
    default: return "unknown";
  }
}

Hdf5TypeInfo DescribeType(hid_t type) {
  Hdf5TypeInfo t;
  H5T_class_t c = H5Tget_class(type);
  t.size = H5Tget_size(type);
  switch (c) {
    case H5T_INTEGER: t.cls = Hdf5TypeInfo::Class::kInteger; break;
    case H5T_FLOAT: t.cls = Hdf5TypeInfo::Class::kFloat; break;
    case H5T_ENUM: t.cls = Hdf5TypeInfo::Class::kEnum; break;
    case H5T_OPAQUE: t.cls = Hdf5TypeInfo::Class::kOpaque; break;
    default:
      t.cls = Hdf5TypeInfo::Class::kOther;
      t.class_name = ClassName(c);
      return t;
  }
  if (t.cls == Hdf5TypeInfo::Class::kOpaque) {
    if (char* tag = H5Tget_tag(type)) {
      t.tag = tag;
      H5free_memory(tag);
    }
    return t;
  }
  t.big_endian = H5Tget_order(type) == H5T_ORDER_BE;
  t.precision = H5Tget_precision(type);
  int offset = H5Tget_offset(type);
  t.offset = offset < 0 ? 0 : static_cast<size_t>(offset);
  if (t.cls == Hdf5TypeInfo::Class::kFloat) {
    H5Tget_fields(type, &t.sign_pos, &t.exp_pos, &t.exp_size, &t.mant_pos, &t.mant_size);
    t.exp_bias = H5Tget_ebias(type);
    return t;
  }
  t.is_signed = H5Tget_sign(type) == H5T_SGN_2;  // enums: of their base type
  if (t.cls == Hdf5TypeInfo::Class::kEnum) {
    int n = H5Tget_nmembers(type);
    for (int i = 0; i < n && t.size <= 8; ++i) {
      char* name = H5Tget_member_name(type, static_cast<unsigned>(i));
      uint8_t raw[8] = {}, le[8] = {};
      if (!name || H5Tget_member_value(type, static_cast<unsigned>(i), raw) < 0) {
        if (name) H5free_memory(name);
        continue;
      }
      for (size_t b = 0; b < t.size; ++b) le[b] = t.big_endian ? raw[t.size - 1 - b] : raw[b];
      uint64_t u = 0;
      for (size_t b = 0; b < t.size; ++b) u |= static_cast<uint64_t>(le[b]) << (8 * b);
      if (t.is_signed && t.size < 8 && (u >> (8 * t.size - 1)) & 1) u |= ~uint64_t{0} << (8 * t.size);
      t.members.emplace_back(name, static_cast<int64_t>(u));
      H5free_memory(name);
    }
  }
  return t;
}

/// A scalar integer attribute, if the object has it.
bool IntAttribute(hid_t obj, const char* name, int64_t* value) {
  if (H5Aexists(obj, name) <= 0) return false;
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) return false;
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  Handle space(H5Aget_space(attr.get()), H5Sclose);
  if (!type.ok() || !space.ok() || H5Tget_class(type.get()) != H5T_INTEGER ||
      H5Sget_simple_extent_npoints(space.get()) != 1)
    return false;
  return H5Aread(attr.get(), H5T_NATIVE_INT64, value) >= 0;
}

constexpr int64_t kAscendTypeTensorOptions = 18;  // SaveType::TENSOR_OPTS: no data written
constexpr int64_t kAscendDataTypeByte = 2;        // uint8, stored as int8
constexpr int64_t kAscendDataTypeBool = 9;        // bool, stored as int8

/// What a dataset is and how to read it.
struct DatasetPlan {
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;
  std::string stored;         ///< stored type when it differs from dtype
  uint64_t stored_bytes = 0;  ///< H5Dget_storage_size
  bool widen = false;         ///< read through HDF5's integer conversion to dtype
  std::string skip;           ///< non-empty: not a tensor, why
};

Expected<DatasetPlan> PlanDataset(hid_t ds, const std::string& where) {
  DatasetPlan p;
  int64_t save_type = 0;
  if (IntAttribute(ds, "Type", &save_type) && save_type == kAscendTypeTensorOptions) {
    p.skip = "TensorOptions record (Type attribute 18), no tensor data";
    return p;
  }
  Handle space(H5Dget_space(ds), H5Sclose);
  if (!space.ok()) return ParseError(where + ": cannot read the dataspace");
  H5S_class_t sc = H5Sget_simple_extent_type(space.get());
  if (sc == H5S_NULL) {
    p.skip = "null dataspace, no data";
    return p;
  }
  if (sc != H5S_SCALAR && sc != H5S_SIMPLE) return ParseError(where + ": unreadable dataspace");
  // Data kept in other files is never read: an external raw-data file or a virtual dataset's
  // sources are names inside the dump that could point anywhere (docs/safety.md).
  Handle dcpl(H5Dget_create_plist(ds), H5Pclose);
  if (!dcpl.ok()) return ParseError(where + ": cannot read the dataset's creation properties");
  if (H5Pget_layout(dcpl.get()) == H5D_VIRTUAL)
    return Status(ErrorCode::kUnsupported, where + ": a virtual dataset (its data lives in other files); not read");
  if (H5Pget_external_count(dcpl.get()) > 0)
    return Status(ErrorCode::kUnsupported, where + ": its data is stored in an external file; not read");
  p.stored_bytes = H5Dget_storage_size(ds);
  if (sc == H5S_SIMPLE) {
    int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 0) return ParseError(where + ": unreadable dataspace");
    std::vector<hsize_t> dims(static_cast<size_t>(rank));
    if (H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0)
      return ParseError(where + ": unreadable dataspace");
    uint64_t numel = 1;
    for (hsize_t d : dims) {
      if (d > static_cast<hsize_t>(std::numeric_limits<int64_t>::max()) || (d != 0 && numel > (uint64_t{1} << 60) / d))
        return ParseError(where + ": dataspace too large");
      numel *= d;
      p.shape.push_back(static_cast<int64_t>(d));
    }
  }
  Handle type(H5Dget_type(ds), H5Tclose);
  if (!type.ok()) return ParseError(where + ": cannot read the datatype");
  Hdf5TypeInfo info = DescribeType(type.get());
  auto mapped = MapHdf5Type(info);
  if (!mapped.ok()) return Status(mapped.status().code(), where + ": " + mapped.status().message());
  p.dtype = mapped->dtype;
  p.widen = mapped->widened;
  if (p.widen) p.stored = DescribeHdf5Type(info);
  int64_t data_type = 0;
  if (info.cls == Hdf5TypeInfo::Class::kInteger && info.size == 1 && IntAttribute(ds, "DataType", &data_type)) {
    if (data_type == kAscendDataTypeByte && p.dtype != DType::kU8) {
      p.stored = DescribeHdf5Type(info) + ", DataType attribute 2 (uint8)";
      p.dtype = DType::kU8;
    } else if (data_type == kAscendDataTypeBool) {
      p.stored = DescribeHdf5Type(info) + ", DataType attribute 9 (bool)";
      p.dtype = DType::kBool;
    }
  }
  if (p.dtype == DType::kBool && info.cls == Hdf5TypeInfo::Class::kEnum) p.stored.clear();  // h5py's own bool
  return p;
}

hid_t StandardLeInt(DType t) {
  switch (t) {
    case DType::kI64: return H5T_STD_I64LE;
    case DType::kI32: return H5T_STD_I32LE;
    case DType::kI16: return H5T_STD_I16LE;
    default: return H5T_STD_I8LE;
  }
}

/// The memory type: the stored type in little-endian order (same layout, so the bytes are the
/// values), or for widened integers the signed little-endian integer HDF5 converts into.
Handle MemoryType(hid_t file_type, const DatasetPlan& p) {
  if (p.widen) return Handle(H5Tcopy(StandardLeInt(p.dtype)), H5Tclose);
  Handle mem(H5Tcopy(file_type), H5Tclose);
  if (mem.ok() && H5Tget_size(file_type) > 1 && H5Tget_class(file_type) != H5T_OPAQUE &&
      H5Tget_order(file_type) != H5T_ORDER_LE) {
    if (H5Tset_order(mem.get(), H5T_ORDER_LE) < 0) return Handle();
  }
  return mem;
}

struct RoleEntry {
  std::string path;   ///< full dataset path
  bool flat = false;  ///< `input.N` beside the role groups
  long long n = 0;    ///< N of a flat entry
  size_t order = 0;   ///< position among group entries
};

/// `input.3`, `output_0` → role and N.
bool ParseFlatName(const std::string& name, std::string* role, long long* n) {
  for (const char* r : {"input", "output"}) {
    size_t len = std::strlen(r);
    if (name.size() > len + 1 && name.compare(0, len, r) == 0 && (name[len] == '.' || name[len] == '_')) {
      std::string digits = name.substr(len + 1);
      if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return false;
      *role = r;
      *n = std::stoll(digits);
      return true;
    }
  }
  return false;
}

/// The tensors of one `/op/seqid` group (see hdf5_dump.h for the forms and the order).
void ListSeqid(hid_t file, const fs::path& path, hid_t sg, const std::string& op, const std::string& seq,
               ErrorCapture& cap, Hdf5Listing* out) {
  const std::string seq_path = "/" + op + "/" + seq;
  auto children = ChildNames(sg, Where(path, seq_path), true, cap);
  if (!children.ok()) {
    out->errors.push_back(children.status().message());
    return;
  }
  std::vector<RoleEntry> entries[2];  // input, output
  auto add_group = [&](hid_t g, const std::string& gpath, int role, size_t depth, auto&& self) -> void {
    auto names = ChildNames(g, Where(path, gpath), true, cap);
    if (!names.ok()) {
      out->errors.push_back(names.status().message());
      return;
    }
    for (const std::string& n : *names) {
      std::string p = gpath + "/" + n;
      Kind ck = ChildKind(g, n);
      if (ck == Kind::kDataset) {
        entries[role].push_back({p, false, 0, entries[role].size()});
      } else if (ck == Kind::kGroup && depth == 0) {  // a tensor list
        Handle lg(H5Gopen2(g, n.c_str(), H5P_DEFAULT), H5Gclose);
        if (lg.ok()) self(lg.get(), p, role, depth + 1, self);
        else out->errors.push_back(Where(path, p) + ": cannot open" + cap.Detail());
      } else {
        out->skipped.push_back(Where(path, p) + ": " + KindName(ck) + (ck == Kind::kGroup ? " nested too deep" : ""));
      }
    }
  };
  for (const std::string& c : *children) {
    std::string p = seq_path + "/" + c;
    Kind ck = ChildKind(sg, c);
    std::string role;
    long long n = 0;
    if (c == "input" || c == "output") {
      int r = c == "input" ? 0 : 1;
      if (ck == Kind::kGroup) {
        Handle rg(H5Gopen2(sg, c.c_str(), H5P_DEFAULT), H5Gclose);
        if (rg.ok()) add_group(rg.get(), p, r, 0, add_group);
        else out->errors.push_back(Where(path, p) + ": cannot open" + cap.Detail());
        continue;
      }
      if (ck == Kind::kDataset) {
        entries[r].push_back({p, true, 0, 0});
        continue;
      }
    } else if (ParseFlatName(c, &role, &n) && ck == Kind::kDataset) {
      entries[role == "input" ? 0 : 1].push_back({p, true, n, 0});
      continue;
    }
    out->skipped.push_back(Where(path, p) + ": " + KindName(ck) + " outside the input/output convention");
  }
  for (int r = 0; r < 2; ++r) {
    std::stable_sort(entries[r].begin(), entries[r].end(), [](const RoleEntry& a, const RoleEntry& b) {
      if (a.flat != b.flat) return !a.flat;
      return a.flat ? a.n < b.n : a.order < b.order;
    });
    size_t index = 0;
    for (const RoleEntry& e : entries[r]) {
      Handle ds(H5Dopen2(file, e.path.c_str(), H5P_DEFAULT), H5Dclose);
      if (!ds.ok()) {
        out->errors.push_back(Where(path, e.path) + ": cannot open the dataset" + cap.Detail());
        continue;
      }
      auto plan = PlanDataset(ds.get(), Where(path, e.path));
      if (!plan.ok()) {
        out->errors.push_back(plan.status().message() + cap.Detail());
        continue;
      }
      if (!plan->skip.empty()) {
        out->skipped.push_back(Where(path, e.path) + ": " + plan->skip);
        continue;
      }
      Hdf5Tensor t;
      t.op = op;
      t.seqid = seq;
      t.role = r == 0 ? "input" : "output";
      t.index = index++;
      t.path = e.path;
      t.dtype = plan->dtype;
      t.shape = plan->shape;
      t.stored = plan->stored;
      t.stored_bytes = plan->stored_bytes;
      out->tensors.push_back(std::move(t));
    }
  }
}

}  // namespace

std::string PrintableName(const std::string& name) {
  std::string out;
  auto escape = [&](unsigned char c) {
    static const char* hex = "0123456789abcdef";
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  for (size_t i = 0; i < name.size();) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) {
      escape(c);
      ++i;
      continue;
    }
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= name.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(name[i + k]) & 0xC0) == 0x80;
    if (ok && len == 2) ok = c >= 0xC2;  // no overlong forms
    if (!ok) {
      escape(c);
      ++i;
      continue;
    }
    out.append(name, i, len);
    i += len;
  }
  return out;
}

Expected<IsolatedRun> RunIsolated(const fs::path& file, const std::vector<fs::path>& tmp_dirs,
                                  const std::function<int(int report_fd)>& work) {
  // The child's pid comes first on the report descriptor: its temporary files are named after it.
  auto run = RunForked(
      [&work](int fd) {
        int64_t pid = ::getpid();
        if (!WriteAllToFd(fd, &pid, sizeof pid)) return 125;
        return work(fd);
      },
      ForkOptions{});
  if (!run.ok()) return run.status();
  int64_t pid = 0;
  if (run->output.size() >= sizeof pid) std::memcpy(&pid, run->output.data(), sizeof pid);
  if (pid > 0) {
    std::string suffix = ".tmp." + std::to_string(pid);
    for (const fs::path& dir : tmp_dirs) {
      std::error_code ec;
      for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        std::string n = it->path().filename().string();
        if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
          fs::remove(it->path(), ec);
      }
    }
  }
  if (run->end == ProcessResult::End::kSignaled)
    return ParseError(file.string() + ": corrupt HDF5 file: the HDF5 library crashed reading it (" +
                      std::string(strsignal(run->signal)) + ")");
  if (run->end != ProcessResult::End::kExited || pid <= 0)
    return Status(ErrorCode::kInternal, file.string() + ": worker process " + run->Describe());
  if (run->truncated)
    return Status(ErrorCode::kInternal, file.string() + ": the worker's report was cut at its size limit");
  return IsolatedRun{run->exit_code, run->output.substr(sizeof pid)};
}

void AppendRecord(std::string& out, std::string_view value) {
  auto n = static_cast<uint32_t>(value.size());
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out.append(value);
}

std::vector<std::string> ReadRecords(std::string_view in) {
  std::vector<std::string> out;
  while (in.size() >= sizeof(uint32_t)) {
    uint32_t n = 0;
    std::memcpy(&n, in.data(), sizeof n);
    in.remove_prefix(sizeof n);
    if (n > in.size()) break;  // cut short: what was complete is kept
    out.emplace_back(in.substr(0, n));
    in.remove_prefix(n);
  }
  return out;
}

bool HasHdf5Signature(const fs::path& path) {
  if (!OpenInputFile(path).ok()) return false;  // never block on a FIFO or device
  std::ifstream in(path, std::ios::binary);
  char sig[8] = {};
  return in.read(sig, 8) && std::memcmp(sig, "\x89HDF\r\n\x1a\n", 8) == 0;
}

bool HasHdf5Extension(const fs::path& path) {
  std::string ext = path.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".h5" || ext == ".hdf5" || ext == ".he5";
}

Expected<Hdf5File> Hdf5File::Open(const fs::path& path, uint64_t max_view_elements) {
  ErrorCapture cap;
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFound(path.string() + ": does not exist");
  if (!fs::is_regular_file(path, ec)) return InvalidArgument(path.string() + ": not a regular file");
#if H5_VERSION_GE(1, 12, 0)
  htri_t is = H5Fis_accessible(path.c_str(), H5P_DEFAULT);
#else
  htri_t is = H5Fis_hdf5(path.c_str());
#endif
  if (is == 0) return ParseError(path.string() + ": not an HDF5 file (no HDF5 signature)");
  if (is < 0) return ParseError(path.string() + ": cannot read as HDF5" + cap.Detail());
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.ok()) return Status(ErrorCode::kInternal, path.string() + ": HDF5 property list" + cap.Detail());
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG);  // closing the file closes what is left open in it
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (id < 0) return ParseError(path.string() + ": cannot open the HDF5 file, truncated or corrupt?" + cap.Detail());
  Hdf5File file(path, id);
  file.max_view_elements_ = max_view_elements;
  return file;
}

Hdf5File::~Hdf5File() {
  if (id_ >= 0) {
    ErrorCapture cap;
    H5Fclose(id_);
  }
}

Expected<Hdf5Listing> Hdf5File::List() const {
  ErrorCapture cap;
  Hdf5Listing out;
  Handle root(H5Gopen2(id_, "/", H5P_DEFAULT), H5Gclose);
  if (!root.ok()) return ParseError(Where(path_, "/") + ": cannot open the root group" + cap.Detail());
  auto ops = ChildNames(root.get(), Where(path_, "/"), false, cap);
  if (!ops.ok()) return ops.status();
  for (const std::string& op : *ops) {
    std::string op_path = "/" + op;
    Kind k = ChildKind(root.get(), op);
    if (k != Kind::kGroup) {
      out.skipped.push_back(Where(path_, op_path) + ": " + KindName(k) + ", not an operator group");
      continue;
    }
    Handle og(H5Gopen2(root.get(), op.c_str(), H5P_DEFAULT), H5Gclose);
    if (!og.ok()) {
      out.errors.push_back(Where(path_, op_path) + ": cannot open" + cap.Detail());
      continue;
    }
    auto seqids = ChildNames(og.get(), Where(path_, op_path), false, cap);
    if (!seqids.ok()) {
      out.errors.push_back(seqids.status().message());
      continue;
    }
    for (const std::string& seq : *seqids) {
      std::string seq_path = op_path + "/" + seq;
      Kind sk = ChildKind(og.get(), seq);
      if (sk != Kind::kGroup) {
        out.skipped.push_back(Where(path_, seq_path) + ": " + KindName(sk) + ", not a seqid group");
        continue;
      }
      Handle sg(H5Gopen2(og.get(), seq.c_str(), H5P_DEFAULT), H5Gclose);
      if (!sg.ok()) {
        out.errors.push_back(Where(path_, seq_path) + ": cannot open" + cap.Detail());
        continue;
      }
      ListSeqid(id_, path_, sg.get(), op, seq, cap, &out);
    }
  }
  return out;
}

Status Hdf5File::Read(const Hdf5Tensor& t, size_t max_bytes,
                      const std::function<Status(const uint8_t*, size_t)>& sink) const {
  ErrorCapture cap;
  const std::string where = Where(path_, t.path);
  Handle ds(H5Dopen2(id_, t.path.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) return ParseError(where + ": cannot open the dataset" + cap.Detail());
  auto plan = PlanDataset(ds.get(), where);
  if (!plan.ok()) return plan.status();
  if (plan->dtype != t.dtype || plan->shape != t.shape) return ParseError(where + ": changed while reading");
  // Checked before anything is allocated or read: elements the file does not hold (chunks never
  // written read as the fill value) cost work without bytes to bound it.
  const uint64_t numel = t.shape.empty() ? 1 : t.numel();
  const unsigned __int128 bytes = static_cast<unsigned __int128>(numel) * DTypeSize(t.dtype);
  if (max_view_elements_ != 0 && numel > max_view_elements_ &&
      bytes > static_cast<unsigned __int128>(plan->stored_bytes) * kMaxHdf5Expansion)
    return InvalidArgument(where + ": over the limit: a dataset of shape " + ShapeText(t.shape) + " (" +
                           std::to_string(numel) + " elements of " + std::to_string(DTypeSize(t.dtype)) +
                           " bytes) stored in " + std::to_string(plan->stored_bytes) +
                           " bytes of the file (chunks never written read as the fill value), more than " +
                           std::to_string(max_view_elements_) + "; not read. --max-view-elements raises the limit");
  Handle ftype(H5Dget_type(ds.get()), H5Tclose);
  if (!ftype.ok()) return ParseError(where + ": cannot read the datatype" + cap.Detail());
  Handle mem = MemoryType(ftype.get(), *plan);
  if (!mem.ok()) return ParseError(where + ": cannot build the memory type" + cap.Detail());
  const size_t esize = DTypeSize(t.dtype);
  if (H5Tget_size(mem.get()) != esize) return Status(ErrorCode::kInternal, where + ": element size mismatch");
  auto deliver = [&](std::vector<uint8_t>& buf, size_t count) -> Status {
    if (t.dtype == DType::kBool)
      for (size_t i = 0; i < count; ++i) buf[i] = buf[i] != 0;
    return sink(buf.data(), count);
  };
  if (t.shape.empty()) {  // scalar dataspace
    std::vector<uint8_t> buf(esize);
    if (H5Dread(ds.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0)
      return ParseError(where + ": read failed" + cap.Detail());
    return deliver(buf, 1);
  }
  if (t.numel() == 0) return Status::Ok();
  const size_t rank = t.shape.size();
  std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
  max_bytes = std::max(max_bytes, esize);
  // Split at the first dimension whose trailing block fits; read blocks of it in C order.
  size_t k = 0;
  uint64_t inner = 1;
  for (k = 0; k < rank; ++k) {
    inner = 1;
    for (size_t j = k + 1; j < rank; ++j) inner *= dims[j];
    if (inner * esize <= max_bytes) break;
  }
  const uint64_t block = std::min<uint64_t>(dims[k], std::max<uint64_t>(1, max_bytes / (inner * esize)));
  std::vector<uint8_t> buf(block * inner * esize);
  Handle fspace(H5Dget_space(ds.get()), H5Sclose);
  if (!fspace.ok()) return ParseError(where + ": cannot read the dataspace" + cap.Detail());
  std::vector<hsize_t> start(rank, 0), count(rank, 1);
  for (size_t j = k + 1; j < rank; ++j) count[j] = dims[j];
  std::vector<hsize_t> outer(k, 0);  // odometer over dims[0..k)
  while (true) {
    for (hsize_t pos = 0; pos < dims[k]; pos += block) {
      hsize_t n = std::min<hsize_t>(block, dims[k] - pos);
      for (size_t j = 0; j < k; ++j) start[j] = outer[j];
      start[k] = pos;
      count[k] = n;
      hsize_t elems = n * inner;
      Handle mspace(H5Screate_simple(1, &elems, nullptr), H5Sclose);
      if (!mspace.ok() ||
          H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0)
        return ParseError(where + ": cannot select elements" + cap.Detail());
      if (H5Dread(ds.get(), mem.get(), mspace.get(), fspace.get(), H5P_DEFAULT, buf.data()) < 0)
        return ParseError(where + ": read failed at element " + std::to_string(pos) + " of dimension " +
                          std::to_string(k) + cap.Detail());
      PORTKIT_RETURN_IF_ERROR(deliver(buf, elems));
    }
    size_t j = k;
    while (j > 0) {
      --j;
      if (++outer[j] < dims[j]) break;
      outer[j] = 0;
      if (j == 0) return Status::Ok();
    }
    if (k == 0) return Status::Ok();
  }
}

namespace {

/// `raw` with a leading '/', no trailing '/' and no empty components.
std::string NormaliseHdf5Path(const std::string& raw) {
  std::string p;
  size_t i = 0;
  while (i < raw.size()) {
    size_t j = raw.find('/', i);
    if (j == std::string::npos) j = raw.size();
    if (j > i) p += "/" + raw.substr(i, j - i);
    i = j + 1;
  }
  return p.empty() ? raw : p;
}

/// Whether `path` (normalised) names an object of the open file `id`: each prefix must exist.
bool Hdf5PathExists(hid_t id, const std::string& path) {
  if (path.empty() || path[0] != '/' || path == "/") return false;
  for (size_t j = path.find('/', 1);; j = path.find('/', j + 1)) {
    std::string prefix = path.substr(0, j);
    if (H5Lexists(id, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (j == std::string::npos) return true;
  }
}

/// Sorts the wanted paths (normalised) of the file `id` into `result`: missing, covered (inside
/// another selected object, when no destinations are given) or copied; returns the destination of
/// each path found.
std::map<std::string, std::string> SelectHdf5Objects(hid_t id, const std::vector<std::string>& names,
                                                     const std::vector<std::string>& wanted,
                                                     const std::vector<std::string>& dest, Hdf5ExtractResult* result) {
  std::map<std::string, std::string> dest_of;  // selected path -> destination
  // Ancestors first so that a seqid inside a selected operator is not copied twice.
  std::vector<size_t> order(wanted.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::count(wanted[a].begin(), wanted[a].end(), '/') < std::count(wanted[b].begin(), wanted[b].end(), '/');
  });
  std::vector<std::string> selected;
  std::vector<bool> found(wanted.size(), false), covered(wanted.size(), false);
  for (size_t i : order) {
    const std::string& p = wanted[i];
    if (!Hdf5PathExists(id, p)) continue;
    found[i] = true;
    // With explicit destinations every pair is copied as given (h5copy copies what it is told).
    if (dest.empty())
      for (const std::string& s : selected)
        if (p == s || (p.size() > s.size() && p.compare(0, s.size(), s) == 0 && p[s.size()] == '/')) covered[i] = true;
    if (!covered[i]) selected.push_back(p);
    dest_of[p] = dest.empty() ? p : dest[i];
  }
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (!found[i]) result->missing.push_back(names[i]);
    else if (covered[i]) result->covered.push_back(wanted[i]);
    else result->copied.push_back(wanted[i]);
  }
  return dest_of;
}

/// Copies `copied` from the open file `src` (read from `in`) into the file `tmp`, created, or
/// opened when `appended` (a copy of `out`), then flushes and closes it. Messages name `out`.
Status CopyHdf5Objects(hid_t src, const fs::path& in, const fs::path& tmp, const fs::path& out, bool appended,
                       const std::vector<std::string>& copied, const std::map<std::string, std::string>& dest_of,
                       ErrorCapture& cap) {
  Handle fout(appended ? H5Fopen(tmp.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)
                       : H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
              H5Fclose);
  if (!fout.ok())
    return IoError(out.string() + (appended ? ": cannot open to append" : ": cannot create") + cap.Detail());
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  if (!lcpl.ok() || H5Pset_create_intermediate_group(lcpl.get(), 1) < 0)
    return IoError(out.string() + ": HDF5 property list" + cap.Detail());
  for (const std::string& p : copied) {
    const std::string& d = dest_of.at(p);
    if (Hdf5PathExists(fout.get(), d))
      return InvalidArgument(out.string() + ": " + d + " already exists; not copied again (h5copy refuses too)");
    if (H5Ocopy(src, p.c_str(), fout.get(), d.c_str(), H5P_DEFAULT, lcpl.get()) < 0)
      return IoError(Where(in, p) + ": cannot copy into " + out.string() + (d != p ? " as " + d : "") + cap.Detail());
  }
  if (H5Fflush(fout.get(), H5F_SCOPE_GLOBAL) < 0 || !fout.Close())
    return IoError(out.string() + ": cannot write" + cap.Detail());
  return Status::Ok();
}

/// Syncs the written `tmp` to disk and renames it onto `out`.
Status SyncAndRename(const fs::path& tmp, const fs::path& out) {
  int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    int err = errno;
    if (fd >= 0) ::close(fd);
    return IoError(out.string() + ": cannot write: " + std::strerror(err));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), out.c_str()) != 0)
    return IoError(out.string() + ": cannot rename into place: " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

Expected<Hdf5ExtractResult> ExtractHdf5(const fs::path& in, const fs::path& out, const std::vector<std::string>& names,
                                        const std::vector<std::string>& destinations, bool append) {
  if (!destinations.empty() && destinations.size() != names.size())
    return InvalidArgument("-d: give one destination per -s name (" + std::to_string(names.size()) + " names, " +
                           std::to_string(destinations.size()) + " destinations)");
  auto file = Hdf5File::Open(in);
  if (!file.ok()) return file.status();
  std::error_code ec;
  if (fs::exists(out, ec) && fs::equivalent(in, out, ec))
    return InvalidArgument(out.string() + ": the output would replace the input");
  ErrorCapture cap;
  Hdf5ExtractResult result;
  // Normalise: leading '/', no trailing '/', no empty components.
  std::vector<std::string> wanted, dest;
  for (const std::string& raw : names) wanted.push_back(NormaliseHdf5Path(raw));
  for (const std::string& raw : destinations) {
    dest.push_back(NormaliseHdf5Path(raw));
    if (dest.back().empty() || dest.back()[0] != '/' || dest.back() == "/")
      return InvalidArgument("-d " + raw + ": not an object path (/op_name or /op_name/seqid)");
  }
  const std::map<std::string, std::string> dest_of = SelectHdf5Objects(file->id_, names, wanted, dest, &result);
  if (result.copied.empty()) return result;

  fs::path tmp = out;
  tmp += ".tmp." + std::to_string(::getpid());
  result.appended = append && fs::exists(out, ec);
  Status st = Status::Ok();
  if (result.appended) {
    if (H5Fis_hdf5(out.c_str()) <= 0)
      return InvalidArgument(out.string() +
                             ": exists and is not an HDF5 file; not appended to (give a new -o, or "
                             "--force to replace it)");
    fs::copy_file(out, tmp, fs::copy_options::overwrite_existing, ec);
    if (ec) st = IoError(out.string() + ": cannot copy it to append to: " + ec.message());
  }
  if (st.ok()) st = CopyHdf5Objects(file->id_, in, tmp, out, result.appended, result.copied, dest_of, cap);
  if (st.ok()) st = SyncAndRename(tmp, out);
  if (!st.ok()) {
    fs::remove(tmp, ec);  // a failure leaves `out` as it was, and no temporary
    return st;
  }
  return result;
}

}  // namespace portkit::accuracy
