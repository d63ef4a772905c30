// One interface for the tensor files compare reads (see tensor_data_file.h). Format facts:
// torch.save since PyTorch 1.6 writes a zip archive (torch/serialization.py `_save`, the
// PyTorchStreamWriter of caffe2/serialize/inline_container.cc): `<archive>/data.pkl` (the pickled
// object, storages as persistent ids), `<archive>/data/<key>` (each storage's bytes, little-endian
// unless `<archive>/byteorder` says "big"), all stored uncompressed with their data aligned to 64
// bytes. The legacy format (torch < 1.6, or _use_new_zipfile_serialization=False) is a bare pickle
// stream starting with a pickled magic number. .npy: numpy's NEP 1 (`\x93NUMPY`, major, minor, a
// header length of 2 bytes in 1.0 and 4 bytes in 2.0/3.0, then a Python dict literal with descr,
// fortran_order and shape, then the data).
#include "accuracy/tensor_data_file.h"

#include <algorithm>
#include <cstring>

#include "accuracy/torch_pickle.h"
#include "accuracy/zip_directory.h"

namespace portkit::accuracy {
namespace fs = std::filesystem;
namespace {

/// Places a tensor of `t.shape` and element type `t.dtype` at element `offset` of a storage of
/// `storage_numel` elements whose first byte is at `base`, with element `strides` (empty: C order).
/// Checks that every element it reaches lies in the storage, and that a view reading storage
/// elements more than once stays within `limits`; contiguous tensors get no strides.
Status Place(TensorInfo& t, uint64_t base, uint64_t offset, std::vector<int64_t> strides, uint64_t storage_numel,
             const std::string& where, const TensorLimits& limits) {
  const uint64_t es = DTypeSize(t.dtype);
  unsigned __int128 numel = 1;
  for (int64_t d : t.shape) {
    if (d < 0) return ParseError(where + ": negative size in shape " + ShapeText(t.shape));
    numel *= static_cast<uint64_t>(d);
    if (numel > (uint64_t{1} << 62)) return ParseError(where + ": shape " + ShapeText(t.shape) + " overflows");
  }
  if (strides.empty()) {  // C order
    strides.assign(t.shape.size(), 0);
    int64_t s = 1;
    for (size_t i = t.shape.size(); i-- > 0;) strides[i] = s, s *= std::max<int64_t>(t.shape[i], 1);
  }
  if (strides.size() != t.shape.size()) return ParseError(where + ": as many strides as sizes needed");
  if (numel == 0) {
    t.begin = t.end = base;
    return Status::Ok();
  }
  // The last element reached, in 128 bits: a lying stride cannot wrap around.
  unsigned __int128 last = offset;
  bool contiguous = true;
  unsigned __int128 expect = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (strides[i] < 0) return ParseError(where + ": negative stride");
    last += static_cast<unsigned __int128>(t.shape[i] - 1) * static_cast<uint64_t>(strides[i]);
    if (last > (uint64_t{1} << 62)) return ParseError(where + ": strides reach beyond any file");
    if (t.shape[i] != 1 && static_cast<unsigned __int128>(strides[i]) != expect) contiguous = false;
    expect *= static_cast<uint64_t>(t.shape[i]);
  }
  if (last >= storage_numel)
    return ParseError(where + ": the tensor (shape " + ShapeText(t.shape) + ", offset " + std::to_string(offset) +
                      ") reaches element " + std::to_string(static_cast<uint64_t>(last)) + " of a storage of " +
                      std::to_string(storage_numel) + " elements: the header lies, or the file is truncated");
  // Every element read lies in [offset, last]: more elements than that span reads some of them
  // more than once (a stride of 0, overlapping strides), and the work is no longer bounded by the
  // file's size.
  const uint64_t span = static_cast<uint64_t>(last) - offset + 1;
  if (numel > span && limits.max_view_elements != 0 && numel > limits.max_view_elements) {
    std::string strides_text;
    for (int64_t s : strides) strides_text += (strides_text.empty() ? "" : ", ") + std::to_string(s);
    return InvalidArgument(
        where + ": over the limit: a view of shape " + ShapeText(t.shape) + " with strides [" + strides_text +
        "] reads " + std::to_string(static_cast<uint64_t>(numel)) + " elements from " + std::to_string(span) +
        " elements of its storage (a stride-0 or overlapping view), more than " +
        std::to_string(limits.max_view_elements) + "; not read. --max-view-elements raises the limit");
  }
  t.begin = base + offset * es;
  if (contiguous) {
    t.end = t.begin + static_cast<uint64_t>(numel) * es;
    t.strides.clear();
  } else {
    t.end = base + (static_cast<uint64_t>(last) + 1) * es;
    t.strides = std::move(strides);
  }
  return Status::Ok();
}

constexpr uint64_t kMaxPickleBytes = uint64_t{1} << 20;

const ZipEntry* FindEntry(const std::vector<ZipEntry>& entries, const std::string& name) {
  for (const auto& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

/// The one tensor of a torch.save zip archive `bytes`.
Status ReadTorchZip(std::string_view bytes, const std::string& p, const TensorLimits& limits, TensorInfo& t,
                    std::string& type_name) {
  auto entries = ReadZipDirectory(bytes, p);
  if (!entries.ok()) return entries.status();
  const ZipEntry* pkl = nullptr;
  for (const auto& e : *entries) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      pkl = &e;
      break;
    }
  }
  if (!pkl) return ParseError(p + ": a zip archive without <archive>/data.pkl: not written by torch.save");
  const std::string prefix = pkl->name.substr(0, pkl->name.size() - 8);  // "<archive>/"
  auto usable = [&](const ZipEntry& e) -> Status {
    if (e.encrypted) return ParseError(p + ": zip entry " + e.name + " is encrypted");
    if (e.method != 0 || e.size != e.uncompressed_size)
      return ParseError(p + ": zip entry " + e.name + " is compressed (method " + std::to_string(e.method) +
                        "); torch.save stores its entries uncompressed: was the file re-zipped? Save it again "
                        "with torch.save");
    return Status::Ok();
  };
  if (Status st = usable(*pkl); !st.ok()) return st;
  // A tensor's data.pkl is a few hundred bytes; a larger one holds something else (a model).
  if (pkl->size > kMaxPickleBytes)
    return ParseError(p + ": " + pkl->name + " is " + std::to_string(pkl->size) + " bytes, more than one tensor's (" +
                      std::to_string(kMaxPickleBytes) + " at most): not read");
  if (const ZipEntry* order = FindEntry(*entries, prefix + "byteorder")) {
    if (Status st = usable(*order); !st.ok()) return st;
    if (bytes.substr(order->offset, order->size) == "big")
      return ParseError(p + ": big-endian tensor data (byteorder \"big\") is not read");
  }
  auto pickled = ReadPickledTensor(bytes.substr(pkl->offset, pkl->size), p + ": " + pkl->name);
  if (!pickled.ok()) return pickled.status();
  t.dtype = pickled->dtype;
  t.shape = pickled->shape;
  type_name = pickled->storage_type;
  if (t.dtype == DType::kUnknown) return Status::Ok();  // "not compared": its data is never read
  const std::string record = prefix + "data/" + pickled->storage_key;
  const ZipEntry* data = FindEntry(*entries, record);
  if (!data) return ParseError(p + ": the storage record " + record + " named by data.pkl is missing");
  if (Status st = usable(*data); !st.ok()) return st;
  const uint64_t es = DTypeSize(t.dtype);
  if (pickled->storage_numel > data->size / es)
    return ParseError(p + ": " + record + " holds " + std::to_string(data->size) + " bytes, data.pkl says " +
                      std::to_string(pickled->storage_numel) + " elements of " + std::string(DTypeName(t.dtype)) +
                      ": the header lies, or the file is truncated");
  return Place(t, data->offset, pickled->storage_offset, pickled->strides, pickled->storage_numel,
               p + ": " + pickled->storage_type, limits);
}

/// A tiny reader of the Python literals in a .npy header: a dict of string keys whose values are
/// strings, True / False, or tuples of ints.
class NpyHeaderReader {
 public:
  explicit NpyHeaderReader(std::string_view s) : s_(s) {}
  std::string descr;
  bool fortran = false, have_descr = false, have_order = false, have_shape = false;
  std::vector<int64_t> shape;

  bool Parse() {
    if (!Eat('{')) return false;
    while (true) {
      Skip();
      if (Eat('}')) return true;
      std::string key;
      if (!String(&key) || !Eat(':')) return false;
      Skip();
      if (key == "descr") {
        if (!String(&descr)) return false;
        have_descr = true;
      } else if (key == "fortran_order") {
        if (Word("True")) fortran = true;
        else if (Word("False")) fortran = false;
        else return false;
        have_order = true;
      } else if (key == "shape") {
        if (!Tuple(&shape)) return false;
        have_shape = true;
      } else {
        return false;
      }
      Skip();
      if (!Eat(',')) {
        Skip();
        return Eat('}');
      }
    }
  }

 private:
  void Skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t')) ++i_;
  }
  bool Eat(char c) {
    Skip();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  bool Word(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  bool String(std::string* out) {
    Skip();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) return false;
    char q = s_[i_++];
    size_t end = s_.find(q, i_);
    if (end == std::string_view::npos || end - i_ > 64) return false;
    *out = std::string(s_.substr(i_, end - i_));
    i_ = end + 1;
    return true;
  }
  bool Tuple(std::vector<int64_t>* out) {
    if (!Eat('(')) return false;
    out->clear();
    while (true) {
      Skip();
      if (Eat(')')) return true;
      if (out->size() >= 64) return false;
      size_t start = i_;
      int64_t v = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (v > (INT64_MAX - 9) / 10) return false;
        v = v * 10 + (s_[i_++] - '0');
      }
      if (i_ == start) return false;
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // numpy under Python 2
      out->push_back(v);
      Skip();
      if (!Eat(',')) return Eat(')');
    }
  }
  std::string_view s_;
  size_t i_ = 0;
};

/// numpy's descr → element type; kUnknown (not compared) for complex, structured and others.
/// `why` is set for descrs that are refused outright.
DType NpyDType(const std::string& d, std::string* why) {
  if (d.size() < 2) return DType::kUnknown;
  const char order = d[0];
  const std::string code = d.substr(1);
  if (order == '>' && code != "i1" && code != "u1" && code != "b1") {
    *why = "big-endian data (descr '" + d + "') is not read";
    return DType::kUnknown;
  }
  if (code == "O") {
    *why = "an object array (descr '|O', pickled Python objects) is not read";
    return DType::kUnknown;
  }
  if (order != '<' && order != '|' && order != '=' && order != '>') return DType::kUnknown;
  static constexpr std::pair<std::string_view, DType> kCodes[] = {
      {"f8", DType::kF64}, {"f4", DType::kF32}, {"f2", DType::kF16}, {"i8", DType::kI64},
      {"i4", DType::kI32}, {"i2", DType::kI16}, {"i1", DType::kI8},  {"u8", DType::kU64},
      {"u4", DType::kU32}, {"u2", DType::kU16}, {"u1", DType::kU8},  {"b1", DType::kBool}};
  for (const auto& [c, t] : kCodes)
    if (c == code) return t;
  return DType::kUnknown;
}

Status ReadNpy(std::string_view bytes, const std::string& p, TensorInfo& t, std::string& type_name) {
  if (bytes.size() < 10) return ParseError(p + ": too short for a .npy header: truncated?");
  const int major = static_cast<uint8_t>(bytes[6]);
  if (major < 1 || major > 3) return ParseError(p + ": .npy format version " + std::to_string(major) + " is not known");
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_bytes) return ParseError(p + ": too short for a .npy header: truncated?");
  uint64_t header_len = 0;
  for (size_t i = len_bytes; i-- > 0;) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[8 + i]);
  const uint64_t data_at = 8 + len_bytes + header_len;
  if (data_at > bytes.size())
    return ParseError(p + ": the .npy header (" + std::to_string(header_len) + " bytes) runs past the end of the file");
  NpyHeaderReader h(bytes.substr(8 + len_bytes, header_len));
  if (!h.Parse() || !h.have_descr || !h.have_order || !h.have_shape)
    return ParseError(p + ": the .npy header is not a dict of descr, fortran_order and shape");
  std::string why;
  t.dtype = NpyDType(h.descr, &why);
  type_name = "descr '" + h.descr + "'";
  if (!why.empty()) return ParseError(p + ": " + why);
  t.shape = h.shape;
  if (t.dtype == DType::kUnknown) return Status::Ok();  // "not compared": its data is never read
  const uint64_t es = DTypeSize(t.dtype), have = bytes.size() - data_at;
  uint64_t numel = 1;
  for (int64_t d : t.shape) {
    if (d != 0 && numel > (uint64_t{1} << 62) / static_cast<uint64_t>(d))
      return ParseError(p + ": shape " + ShapeText(t.shape) + " overflows");
    numel *= static_cast<uint64_t>(d);
  }
  if (have % es != 0 || have / es != numel)
    return ParseError(p + ": " + std::to_string(have) + " data bytes for shape " + ShapeText(t.shape) + " of " +
                      std::string(DTypeName(t.dtype)) + " (" + std::to_string(numel) +
                      " elements): truncated, or the header lies");
  std::vector<int64_t> strides;
  if (h.fortran) {  // column-major: the first index varies fastest
    int64_t s = 1;
    for (int64_t d : t.shape) strides.push_back(s), s *= std::max<int64_t>(d, 1);
  }
  return Place(t, data_at, 0, std::move(strides), numel, p, TensorLimits{});  // a .npy never repeats an element
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

Expected<fs::path> TensorDataPath(const fs::path& dir, std::string_view op_file, std::string_view data_name) {
  if (op_file.empty()) return fs::path();
  if (op_file != kTensorDataFolder) return dir / op_file;
  if (data_name.empty()) return fs::path();
  // A data file is a name inside dump_tensor_data/, never a path out of it.
  if (data_name.find_first_of(std::string_view("/\\\0", 3)) != std::string_view::npos || data_name == "." ||
      data_name == "..")
    return ParseError((dir / "dump.json").string() + ": data_name '" + std::string(data_name) +
                      "' is not a file name inside dump_tensor_data/; not read");
  return dir / op_file / data_name;
}

Expected<TensorDataFile> TensorDataFile::Open(const fs::path& path, const TensorLimits& limits) {
  const std::string p = path.string();
  auto view = FileView::Open(path);
  if (!view.ok()) return view.status();
  const std::string_view bytes = view->data();
  TensorDataFile f;
  Status st = Status::Ok();
  if (StartsWith(bytes, std::string_view("PK\x03\x04", 4)) || StartsWith(bytes, std::string_view("PK\x05\x06", 4))) {
    st = ReadTorchZip(bytes, p, limits, f.single_, f.type_name_);
  } else if (StartsWith(bytes, "\x93NUMPY")) {
    st = ReadNpy(bytes, p, f.single_, f.type_name_);
  } else if (StartsWith(bytes, std::string_view("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14))) {
    return ParseError(p +
                      ": the legacy torch.save format (torch < 1.6, or _use_new_zipfile_serialization=False) "
                      "is not read: save it again with torch >= 1.6, or convert the dump with "
                      "`python -m portkit.msprobe`");
  } else {
    const std::string ext = path.extension().string();
    if (ext == ".pt" || ext == ".pth" || ext == ".npy" || ext == ".bin")
      return ParseError(p + ": neither a torch.save zip archive nor a .npy file (" + std::to_string(bytes.size()) +
                        " bytes; " + (bytes.empty() ? "empty" : "no known signature") + ")");
    auto st_file = SafetensorsFile::FromView(std::move(*view), path);
    if (!st_file.ok()) return st_file.status();
    f.safetensors_ = std::move(*st_file);
    return f;
  }
  if (!st.ok()) return st;
  f.view_ = std::move(*view);
  f.base_ = reinterpret_cast<const uint8_t*>(f.view_.data().data());
  return f;
}

const TensorInfo* TensorDataFile::Find(const std::string& key) const {
  if (!safetensors_) return &single_;
  auto it = safetensors_->tensors().find(key);
  return it == safetensors_->tensors().end() ? nullptr : &it->second;
}

const uint8_t* TensorDataFile::Elements(const TensorInfo& t, uint64_t first, size_t count,
                                        std::vector<uint8_t>& scratch) const {
  const size_t es = DTypeSize(t.dtype);
  if (safetensors_) return safetensors_->Data(t) + first * es;
  const uint8_t* begin = base_ + t.begin;
  if (t.strides.empty()) return begin + first * es;
  // Gathered: an odometer over the indices, from the multi-index of `first`.
  scratch.resize(count * es);
  const size_t nd = t.shape.size();
  std::vector<uint64_t> index(nd);
  uint64_t rest = first, at = 0;
  for (size_t d = nd; d-- > 0;) {
    const uint64_t size = static_cast<uint64_t>(t.shape[d]);
    index[d] = rest % size, rest /= size;
    at += index[d] * static_cast<uint64_t>(t.strides[d]);
  }
  uint8_t* out = scratch.data();
  const size_t inner = nd - 1;
  const uint64_t inner_size = static_cast<uint64_t>(t.shape[inner]),
                 inner_stride = static_cast<uint64_t>(t.strides[inner]);
  for (size_t i = 0; i < count; ++i) {
    std::memcpy(out + i * es, begin + at * es, es);
    if (++index[inner] < inner_size) {
      at += inner_stride;
      continue;
    }
    // Carry into the outer dimensions.
    size_t d = inner;
    while (true) {
      at -= (index[d] - 1) * static_cast<uint64_t>(t.strides[d]);
      index[d] = 0;
      if (d == 0) break;
      --d;
      if (++index[d] < static_cast<uint64_t>(t.shape[d])) {
        at += static_cast<uint64_t>(t.strides[d]);
        break;
      }
    }
  }
  return scratch.data();
}

void TensorDataFile::Release(const TensorInfo& t, uint64_t first, uint64_t count) const {
  if (safetensors_) return safetensors_->Release(t, first, count);
  if (!t.strides.empty()) {
    // A piece of a strided tensor may touch any page of its extent (a transpose touches them all):
    // the whole extent goes, and the next piece maps back what it reads (from the page cache).
    view_.ReleaseRange(base_ + t.begin, t.end - t.begin);
    return;
  }
  const size_t es = DTypeSize(t.dtype);
  view_.ReleaseRange(base_ + t.begin + first * es, count * es);
}

}  // namespace portkit::accuracy
