// The tensor files compare reads (src/accuracy/tensor_data_file.h): torch.save zip archives built
// here byte by byte (stored entries, ZIP64, data.pkl as torch writes it with protocol 2), .npy
// files of format 1.0 and 2.0, and what a hostile or broken file may hold: a pickle that names
// os.system or eval, opcodes that build objects, compressed entries, the legacy format, headers
// that lie about sizes, offsets and strides, truncation. Real torch.save files (torch 1.13 and 2.x)
// are read in tests/python/test_msprobe.py.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "accuracy/tensor_data_file.h"
#include "accuracy/torch_pickle.h"
#include "accuracy/zip_directory.h"

namespace portkit::accuracy {
namespace {
namespace fs = std::filesystem;

void Put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

struct Entry {
  std::string name, data;
  uint16_t method = 0;
};

/// A zip archive of `entries` as torch.save lays it out (local header, data; then the directory);
/// `zip64` writes every size and offset through the ZIP64 extra field and end records.
std::string Zip(const std::vector<Entry>& entries, bool zip64 = false) {
  std::string out, dir;
  for (const auto& e : entries) {
    const uint64_t local = out.size();
    Put(out, 0x04034b50, 4), Put(out, 20, 2), Put(out, 0, 2), Put(out, e.method, 2), Put(out, 0, 4), Put(out, 0, 4);
    Put(out, e.data.size(), 4), Put(out, e.data.size(), 4), Put(out, e.name.size(), 2), Put(out, 0, 2);
    out += e.name + e.data;
    Put(dir, 0x02014b50, 4), Put(dir, 20, 2), Put(dir, 20, 2), Put(dir, 0, 2), Put(dir, e.method, 2), Put(dir, 0, 4);
    Put(dir, 0, 4);  // crc
    Put(dir, zip64 ? 0xFFFFFFFF : e.data.size(), 4), Put(dir, zip64 ? 0xFFFFFFFF : e.data.size(), 4);
    Put(dir, e.name.size(), 2), Put(dir, zip64 ? 28 : 0, 2), Put(dir, 0, 2), Put(dir, 0, 2), Put(dir, 0, 2),
        Put(dir, 0, 4);
    Put(dir, zip64 ? 0xFFFFFFFF : local, 4);
    dir += e.name;
    if (zip64)
      Put(dir, 1, 2), Put(dir, 24, 2), Put(dir, e.data.size(), 8), Put(dir, e.data.size(), 8), Put(dir, local, 8);
  }
  const uint64_t dir_at = out.size();
  out += dir;
  if (zip64) {
    const uint64_t record = out.size();
    Put(out, 0x06064b50, 4), Put(out, 44, 8), Put(out, 45, 2), Put(out, 45, 2), Put(out, 0, 4), Put(out, 0, 4);
    Put(out, entries.size(), 8), Put(out, entries.size(), 8), Put(out, dir.size(), 8), Put(out, dir_at, 8);
    Put(out, 0x07064b50, 4), Put(out, 0, 4), Put(out, record, 8), Put(out, 1, 4);
  }
  Put(out, 0x06054b50, 4), Put(out, 0, 2), Put(out, 0, 2);
  Put(out, zip64 ? 0xFFFF : entries.size(), 2), Put(out, zip64 ? 0xFFFF : entries.size(), 2);
  Put(out, zip64 ? 0xFFFFFFFF : dir.size(), 4), Put(out, zip64 ? 0xFFFFFFFF : dir_at, 4), Put(out, 0, 2);
  return out;
}

/// A pickled int as torch's pickler writes it (BININT1 / BININT2 / BININT / LONG1).
std::string Int(int64_t v) {
  std::string s;
  if (v >= 0 && v < 256) s = "K", Put(s, static_cast<uint64_t>(v), 1);
  else if (v >= 0 && v < 65536) s = "M", Put(s, static_cast<uint64_t>(v), 2);
  else if (v >= INT32_MIN && v <= INT32_MAX) s = "J", Put(s, static_cast<uint64_t>(v), 4);
  else s = "\x8a\x08", Put(s, static_cast<uint64_t>(v), 8);
  return s;
}
std::string Str(const std::string& v) {
  std::string s = "X";
  Put(s, v.size(), 4);
  return s + v;
}
std::string Ints(const std::vector<int64_t>& v) {
  if (v.empty()) return ")";
  std::string s = "(";
  for (int64_t x : v) s += Int(x);
  return s + "t";
}

/// data.pkl of `torch.save(t)` for a tensor on storage `type` (FloatStorage...) of `numel`
/// elements, key "0", protocol 2, as torch 1.13 and 2.x write it.
std::string TensorPickle(const std::string& type, int64_t numel, int64_t offset, const std::vector<int64_t>& shape,
                         const std::vector<int64_t>& strides) {
  return std::string("\x80\x02") + "ctorch._utils\n_rebuild_tensor_v2\n" + std::string("q\0((", 4) + Str("storage") +
         "ctorch\n" + type + "\n" + Str("0") + Str("cpu") + Int(numel) + "tQ" + Int(offset) + Ints(shape) +
         Ints(strides) +
         "\x89"
         "ccollections\nOrderedDict\n)Rq\x01tRq\x02.";
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::string TorchFile(const std::string& pickle, const std::string& storage, bool zip64 = false) {
  return Zip({{"archive/data.pkl", pickle},
              {"archive/byteorder", "little"},
              {"archive/data/0", storage},
              {"archive/version", "3\n"}},
             zip64);
}

std::vector<double> Read(const TensorDataFile& f, const TensorInfo& t, uint64_t first, size_t count) {
  std::vector<uint8_t> scratch;
  const uint8_t* p = f.Elements(t, first, count, scratch);
  std::vector<double> out(count);
  DecodeToDouble(t.dtype, p, count, out.data());
  return out;
}

class TensorDataFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_tensor_data_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path Write(const std::string& name, const std::string& bytes) {
    fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  std::string OpenError(const std::string& name, const std::string& bytes) {
    auto f = TensorDataFile::Open(Write(name, bytes));
    return f.ok() ? std::string("(opened)") : f.status().message();
  }
  fs::path dir_;
};

TEST_F(TensorDataFileTest, ContiguousFloatTensorIsReadInPlace) {
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  auto f = TensorDataFile::Open(Write("a.pt", TorchFile(TensorPickle("FloatStorage", 6, 0, {2, 3}, {3, 1}), Bytes(v))));
  ASSERT_TRUE(f.ok()) << f.status().message();
  const TensorInfo* t = f->Find("any key");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::kF32);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(t->strides.empty());
  EXPECT_EQ(Read(*f, *t, 0, 6), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(Read(*f, *t, 4, 2), (std::vector<double>{5, 6}));
}

TEST_F(TensorDataFileTest, OffsetViewAndTransposedViewKeepTheWholeStorage) {
  std::vector<double> storage = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  // x[2:5] of a 12-element storage: contiguous from element 2.
  auto slice =
      TensorDataFile::Open(Write("s.pt", TorchFile(TensorPickle("DoubleStorage", 12, 2, {3}, {1}), Bytes(storage))));
  ASSERT_TRUE(slice.ok()) << slice.status().message();
  EXPECT_EQ(Read(*slice, *slice->Find(""), 0, 3), (std::vector<double>{2, 3, 4}));
  // arange(12).reshape(3, 4).t()[1:]: shape (3, 3), strides (1, 4), offset 1; gathered in C order,
  // from any element on (pieces that cross rows).
  auto view = TensorDataFile::Open(
      Write("v.pt", TorchFile(TensorPickle("DoubleStorage", 12, 1, {3, 3}, {1, 4}), Bytes(storage))));
  ASSERT_TRUE(view.ok()) << view.status().message();
  const TensorInfo& t = *view->Find("");
  EXPECT_EQ(t.strides, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(Read(*view, t, 0, 9), (std::vector<double>{1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(Read(*view, t, 2, 5), (std::vector<double>{9, 2, 6, 10, 3}));
  // Every other element of a 3-d view: x[::2, :, ::2] of shape (2, 2, 3) in a 4x2x6 storage.
  std::vector<double> big(48);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<double>(i);
  auto strided = TensorDataFile::Open(
      Write("w.pt", TorchFile(TensorPickle("DoubleStorage", 48, 0, {2, 2, 3}, {24, 6, 2}), Bytes(big))));
  ASSERT_TRUE(strided.ok()) << strided.status().message();
  EXPECT_EQ(Read(*strided, *strided->Find(""), 0, 12),
            (std::vector<double>{0, 2, 4, 6, 8, 10, 24, 26, 28, 30, 32, 34}));
  EXPECT_EQ(Read(*strided, *strided->Find(""), 5, 3), (std::vector<double>{10, 24, 26}));
}

TEST_F(TensorDataFileTest, ScalarBf16Int64BoolAndUnsupportedTypes) {
  auto scalar = TensorDataFile::Open(
      Write("0d.pt", TorchFile(TensorPickle("FloatStorage", 1, 0, {}, {}), Bytes(std::vector<float>{2.5f}))));
  ASSERT_TRUE(scalar.ok()) << scalar.status().message();
  EXPECT_TRUE(scalar->Find("")->shape.empty());
  EXPECT_EQ(scalar->Find("")->numel(), 1u);
  EXPECT_EQ(Read(*scalar, *scalar->Find(""), 0, 1), (std::vector<double>{2.5}));
  // bf16 1.0 and -2.0.
  auto bf16 = TensorDataFile::Open(Write("b.pt", TorchFile(TensorPickle("BFloat16Storage", 2, 0, {2}, {1}),
                                                           Bytes(std::vector<uint16_t>{0x3F80, 0xC000}))));
  ASSERT_TRUE(bf16.ok()) << bf16.status().message();
  EXPECT_EQ(bf16->Find("")->dtype, DType::kBF16);
  EXPECT_EQ(Read(*bf16, *bf16->Find(""), 0, 2), (std::vector<double>{1, -2}));
  auto i64 = TensorDataFile::Open(Write(
      "i.pt", TorchFile(TensorPickle("LongStorage", 2, 0, {2}, {1}), Bytes(std::vector<int64_t>{-7, 1LL << 40}))));
  ASSERT_TRUE(i64.ok()) << i64.status().message();
  EXPECT_EQ(Read(*i64, *i64->Find(""), 0, 2), (std::vector<double>{-7, 1099511627776.0}));
  auto b = TensorDataFile::Open(
      Write("bool.pt", TorchFile(TensorPickle("BoolStorage", 3, 0, {3}, {1}), std::string("\x01\x00\x01", 3))));
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->Find("")->dtype, DType::kBool);
  // A complex tensor opens, with no element type to compare (compare writes "not compared").
  auto c = TensorDataFile::Open(
      Write("c.pt", TorchFile(TensorPickle("ComplexFloatStorage", 2, 0, {2}, {1}), std::string(16, '\0'))));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->Find("")->dtype, DType::kUnknown);
}

TEST_F(TensorDataFileTest, Zip64ArchivesAreRead) {
  std::vector<int32_t> v = {7, 8, 9};
  auto f = TensorDataFile::Open(Write("z64.pt", TorchFile(TensorPickle("IntStorage", 3, 0, {3}, {1}), Bytes(v), true)));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(Read(*f, *f->Find(""), 0, 3), (std::vector<double>{7, 8, 9}));
  auto entries = ReadZipDirectory(Zip({{"a/b", "xyz"}}, true), "mem");
  ASSERT_TRUE(entries.ok()) << entries.status().message();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].size, 3u);
}

TEST_F(TensorDataFileTest, PickleNamingAnythingButATensorIsRefusedNeverRun) {
  const std::string storage = Bytes(std::vector<float>{1});
  // torch.save of an object whose __reduce__ is os.system("touch PWNED").
  std::string evil = std::string("\x80\x02") + "cos\nsystem\n" + std::string("q\0", 2) +
                     Str("touch " + (dir_ / "PWNED").string()) + "\x85R.";
  EXPECT_EQ(
      OpenError("evil.pt", TorchFile(evil, storage)),
      (dir_ / "evil.pt").string() +
          ": archive/data.pkl: byte 2: refers to os.system, which a saved tensor does "
          "not use: refused, nothing in the file was run (accepted: torch._utils._rebuild_tensor_v2/_v3, "
          "torch._utils._rebuild_parameter, collections.OrderedDict, torch.*Storage, torch.storage.UntypedStorage, "
          "torch dtypes)");
  EXPECT_FALSE(fs::exists(dir_ / "PWNED"));
  // builtins.eval by STACK_GLOBAL (protocol 4).
  std::string eval = std::string("\x80\x04\x95\x10\0\0\0\0\0\0\0", 11) +
                     "\x8c\x08"
                     "builtins"
                     "\x8c\x04"
                     "eval\x93" +
                     "\x8c\x04"
                     "1+1\x85R.";
  EXPECT_NE(OpenError("eval.pt", TorchFile(eval, storage)).find("refers to builtins.eval, which a saved tensor"),
            std::string::npos);
  // A storage class called as a function, and an object built by NEWOBJ: refused.
  std::string call = std::string("\x80\x02") + "ctorch\nFloatStorage\n)R.";
  EXPECT_NE(
      OpenError("call.pt", TorchFile(call, storage)).find("calls torch.FloatStorage, which a saved tensor does not"),
      std::string::npos);
  std::string newobj = std::string("\x80\x02") + "ccollections\nOrderedDict\n)\x81.";
  EXPECT_NE(OpenError("newobj.pt", TorchFile(newobj, storage)).find("opcode 0x81 is not one a saved tensor uses"),
            std::string::npos);
  // Anything but a tensor at the end.
  EXPECT_NE(
      OpenError("list.pt", TorchFile(std::string("\x80\x02]q\0.", 6), storage)).find("holds a list, not a tensor"),
      std::string::npos);
}

TEST_F(TensorDataFileTest, PickleOpcodesOfOtherProtocolsAndWrappers) {
  // Protocol 4 framing, SHORT_BINUNICODE, MEMOIZE and BINGET, LONG1 sizes, a Parameter wrapper.
  std::string p = std::string("\x80\x04\x95\0\0\0\0\0\0\0\0", 11) +
                  "\x8c\x0c"
                  "torch._utils\x94\x8c\x12_rebuild_parameter\x94\x93\x94" +
                  "\x8c\x0c"
                  "torch._utils\x94\x8c\x12_rebuild_tensor_v2\x94\x93\x94((\x8c\x07storage\x94" +
                  "\x8c\x05torch\x94\x8c\x0c"
                  "FloatStorage\x94\x93\x94\x8c\x01"
                  "0\x8c\x03"
                  "cpu\x8a\x01\x04tQ" +
                  Int(0) + "\x8a\x01\x02\x8a\x01\x02\x86K\x02K\x01\x86\x88}tR\x88}\x87R.";
  auto t = ReadPickledTensor(p, "mem");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->dtype, DType::kF32);
  EXPECT_EQ(t->storage_numel, 4u);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t->strides, (std::vector<int64_t>{2, 1}));
  EXPECT_TRUE(t->requires_grad);
  // _rebuild_tensor_v3 on an UntypedStorage (torch 2's fp8): its size in bytes.
  std::string v3 = std::string("\x80\x02") + "ctorch._utils\n_rebuild_tensor_v3\n((" + Str("storage") +
                   "ctorch.storage\nUntypedStorage\n" + Str("0") + Str("cpu") + Int(3) + "tQ" + Int(0) + Ints({3}) +
                   Ints({1}) + "\x89}ctorch\nfloat8_e4m3fn\ntR.";
  auto f8 = ReadPickledTensor(v3, "mem");
  ASSERT_TRUE(f8.ok()) << f8.status().message();
  EXPECT_EQ(f8->dtype, DType::kF8E4M3);
  EXPECT_EQ(f8->storage_numel, 3u);
  // Truncated and malformed pickles.
  EXPECT_EQ(ReadPickledTensor(p.substr(0, 40), "mem").status().message(),
            "mem: byte 26: the pickle ends inside an opcode: truncated?");
  EXPECT_EQ(ReadPickledTensor(p.substr(0, p.size() - 1), "mem").status().message(),
            "mem: ends without a STOP opcode: truncated?");
  EXPECT_EQ(ReadPickledTensor("\x80\x02h\x05.", "mem").status().message(),
            "mem: byte 2: memo entry 5 was never stored");
  EXPECT_NE(ReadPickledTensor("\x80\x02t.", "mem").status().message().find("without a mark"), std::string::npos);
  EXPECT_NE(ReadPickledTensor(".", "mem").status().message().find("finds the stack empty"), std::string::npos);
}

TEST_F(TensorDataFileTest, BrokenAndLyingTorchFilesAreErrorsNamingTheFile) {
  const std::string pkl = TensorPickle("FloatStorage", 6, 0, {2, 3}, {3, 1});
  const std::string good = TorchFile(pkl, Bytes(std::vector<float>(6, 1)));
  const std::string p = (dir_ / "x.pt").string();
  // Truncated anywhere: no end record, or a directory / entry beyond the end.
  EXPECT_EQ(OpenError("x.pt", good.substr(0, good.size() / 2)),
            p + ": no zip end-of-directory record: truncated, or not a zip archive");
  for (size_t cut : {size_t{3}, size_t{30}, size_t{100}, good.size() - 1})
    EXPECT_NE(OpenError("x.pt", good.substr(0, cut)).find(p + ": "), std::string::npos) << cut;
  // data.pkl says 1000 elements; the record holds 24 bytes.
  EXPECT_EQ(
      OpenError("x.pt", TorchFile(TensorPickle("FloatStorage", 1000, 0, {1000}, {1}), Bytes(std::vector<float>(6, 1)))),
      p + ": archive/data/0 holds 24 bytes, data.pkl says 1000 elements of F32: the header lies, or the file is "
          "truncated");
  // Shape, offset or strides that reach past the storage.
  EXPECT_EQ(
      OpenError("x.pt", TorchFile(TensorPickle("FloatStorage", 6, 4, {2, 3}, {3, 1}), Bytes(std::vector<float>(6, 1)))),
      p + ": FloatStorage: the tensor (shape [2, 3], offset 4) reaches element 9 of a storage of 6 elements: the "
          "header lies, or the file is truncated");
  EXPECT_NE(OpenError("x.pt", TorchFile(TensorPickle("FloatStorage", 6, 0, {2, 3}, {1000000, 1}),
                                        Bytes(std::vector<float>(6, 1))))
                .find("reaches element 1000002 of a storage of 6"),
            std::string::npos);
  EXPECT_NE(OpenError("x.pt", TorchFile(TensorPickle("FloatStorage", 6, 0, {2, 3}, {int64_t{1} << 62, 1}),
                                        Bytes(std::vector<float>(6, 1))))
                .find("strides reach beyond any file"),
            std::string::npos);
  // The storage record named by data.pkl is missing.
  EXPECT_EQ(OpenError("x.pt", Zip({{"archive/data.pkl", pkl}})),
            p + ": the storage record archive/data/0 named by data.pkl is missing");
  // A compressed entry (re-zipped with deflate).
  EXPECT_EQ(OpenError("x.pt", Zip({{"archive/data.pkl", pkl, 8}, {"archive/data/0", Bytes(std::vector<float>(6, 1))}})),
            p + ": zip entry archive/data.pkl is compressed (method 8); torch.save stores its entries uncompressed: "
                "was the file re-zipped? Save it again with torch.save");
  // A data.pkl far larger than a tensor's (a whole model, or a pickle made to eat memory).
  EXPECT_EQ(OpenError("x.pt", Zip({{"archive/data.pkl", std::string((1 << 20) + 1, 'N')}})),
            p + ": archive/data.pkl is 1048577 bytes, more than one tensor's (1048576 at most): not read");
  // A zip archive that torch did not write; big-endian data; the legacy format; no known signature.
  EXPECT_EQ(OpenError("x.pt", Zip({{"readme.txt", "hi"}})),
            p + ": a zip archive without <archive>/data.pkl: not written by torch.save");
  EXPECT_EQ(OpenError("x.pt", Zip({{"archive/data.pkl", pkl}, {"archive/byteorder", "big"}})),
            p + ": big-endian tensor data (byteorder \"big\") is not read");
  EXPECT_NE(OpenError("x.pt", std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15))
                .find("the legacy torch.save format (torch < 1.6"),
            std::string::npos);
  EXPECT_EQ(OpenError("x.pt", "hello"),
            p + ": neither a torch.save zip archive nor a .npy file (5 bytes; no known signature)");
  EXPECT_EQ(OpenError("x.pt", ""), p + ": neither a torch.save zip archive nor a .npy file (0 bytes; empty)");
  // A directory whose entries point outside the file.
  std::string lying = good;
  const size_t dir_at = lying.rfind(std::string("PK\x01\x02", 4));
  lying[dir_at + 42] = '\x7f', lying[dir_at + 45] = '\x7f';  // the last entry's local header offset
  EXPECT_NE(OpenError("x.pt", lying).find("its local header lies outside the file"), std::string::npos);
}

std::string Npy(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  const size_t fixed = major == 1 ? 10 : 12;
  header.append((64 - (fixed + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major)), out.push_back('\0');
  Put(out, header.size(), major == 1 ? 2 : 4);
  return out + header + data;
}

TEST_F(TensorDataFileTest, NpyFilesInCAndFortranOrder) {
  auto c = TensorDataFile::Open(Write("c.npy", Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                                   Bytes(std::vector<float>{1, 2, 3, 4, 5, 6}))));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(Read(*c, *c->Find(""), 0, 6), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  // Fortran order: the same 2x3 matrix stored column by column; read back in C order.
  auto f = TensorDataFile::Open(Write("f.npy", Npy("{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3), }",
                                                   Bytes(std::vector<int64_t>{1, 4, 2, 5, 3, 6}), 2)));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(Read(*f, *f->Find(""), 0, 6), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  auto scalar = TensorDataFile::Open(
      Write("s.npy", Npy("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", Bytes(std::vector<double>{-3}))));
  ASSERT_TRUE(scalar.ok()) << scalar.status().message();
  EXPECT_EQ(Read(*scalar, *scalar->Find(""), 0, 1), (std::vector<double>{-3}));
  auto complex = TensorDataFile::Open(
      Write("x.npy", Npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0'))));
  ASSERT_TRUE(complex.ok()) << complex.status().message();
  EXPECT_EQ(complex->Find("")->dtype, DType::kUnknown);
  const std::string p = (dir_ / "bad.npy").string();
  EXPECT_EQ(
      OpenError("bad.npy", Npy("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0'))),
      p + ": big-endian data (descr '>f4') is not read");
  EXPECT_EQ(OpenError("bad.npy", Npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", "x")),
            p + ": an object array (descr '|O', pickled Python objects) is not read");
  EXPECT_EQ(
      OpenError("bad.npy", Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }", std::string(8, '\0'))),
      p + ": 8 data bytes for shape [1000] of F32 (1000 elements): truncated, or the header lies");
  EXPECT_EQ(OpenError("bad.npy", Npy("{'descr': '<f4', 'shape': (1,), }", std::string(4, '\0'))),
            p + ": the .npy header is not a dict of descr, fortran_order and shape");
  EXPECT_EQ(
      OpenError("bad.npy", Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "")),
      p + ": the .npy header is not a dict of descr, fortran_order and shape");
  std::string cut = Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0'));
  EXPECT_NE(OpenError("bad.npy", cut.substr(0, 30)).find("runs past the end of the file"), std::string::npos);
}

TEST_F(TensorDataFileTest, ViewsReadingStorageElementsMoreThanOnceAreCapped) {
  const std::string one = Bytes(std::vector<float>{1.5f});
  // A stride-0 view of a one-element storage claiming 2^50 elements (the 597-byte bomb): refused
  // before any element is read, naming the file, the shape, the strides and the flag.
  const std::string bomb = TorchFile(TensorPickle("FloatStorage", 1, 0, {int64_t{1} << 50}, {0}), one);
  const std::string p = (dir_ / "bomb.pt").string();
  EXPECT_EQ(OpenError("bomb.pt", bomb),
            p + ": FloatStorage: over the limit: a view of shape [1125899906842624] with strides [0] reads "
                "1125899906842624 elements from 1 elements of its storage (a stride-0 or overlapping view), more "
                "than 67108864; not read. --max-view-elements raises the limit");
  auto bomb_file = TensorDataFile::Open(Write("bomb.pt", bomb));
  EXPECT_EQ(bomb_file.status().code(), ErrorCode::kInvalidArgument);
  // Overlapping strides: each row the previous one shifted by one element.
  const std::string overlap =
      TorchFile(TensorPickle("FloatStorage", 599, 0, {300, 300}, {1, 1}), std::string(4 * 599, '\0'));
  EXPECT_EQ(OpenError("o.pt", overlap), "(opened)");  // under the default cap
  auto capped = TensorDataFile::Open(Write("o.pt", overlap), TensorLimits{1000});
  ASSERT_FALSE(capped.ok());
  EXPECT_NE(capped.status().message().find("reads 90000 elements from 599 elements of its storage (a stride-0 or "
                                           "overlapping view), more than 1000"),
            std::string::npos)
      << capped.status().message();
  // A small expand is read (every element the one stored value); 0 lifts the cap.
  auto expand = TensorDataFile::Open(Write("e.pt", TorchFile(TensorPickle("FloatStorage", 1, 0, {4, 3}, {0, 0}), one)));
  ASSERT_TRUE(expand.ok()) << expand.status().message();
  EXPECT_EQ(Read(*expand, *expand->Find(""), 0, 12), std::vector<double>(12, 1.5));
  EXPECT_TRUE(TensorDataFile::Open(Write("bomb.pt", bomb), TensorLimits{0}).ok());
  // A view whose elements are distinct is never capped, however large against the cap.
  std::vector<float> storage(64, 2.0f);
  auto strided = TensorDataFile::Open(
      Write("s.pt", TorchFile(TensorPickle("FloatStorage", 64, 0, {8, 4}, {8, 2}), Bytes(storage))), TensorLimits{4});
  EXPECT_TRUE(strided.ok()) << strided.status().message();
  EXPECT_EQ(strided->TypeName(), "FloatStorage");
}

TEST(TensorDataPath, DataNamesStayInsideTheDataFolder) {
  const fs::path dir = "/d/step0/rank0";
  EXPECT_EQ(*TensorDataPath(dir, "op_000001.safetensors", "ignored.pt"), dir / "op_000001.safetensors");
  EXPECT_EQ(*TensorDataPath(dir, "", "x.pt"), fs::path());
  EXPECT_EQ(*TensorDataPath(dir, kTensorDataFolder, ""), fs::path());
  EXPECT_EQ(*TensorDataPath(dir, kTensorDataFolder, "Functional.relu.0.forward.output.0.pt"),
            dir / "dump_tensor_data" / "Functional.relu.0.forward.output.0.pt");
  for (const char* bad : {"../../etc/passwd", "a/b.pt", "..", "a\\b.pt"}) {
    auto p = TensorDataPath(dir, kTensorDataFolder, bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().message(), "/d/step0/rank0/dump.json: data_name '" + std::string(bad) +
                                        "' is not a file name inside dump_tensor_data/; not read");
  }
}

}  // namespace
}  // namespace portkit::accuracy
