// HDF5 dumps: the element-type mapping on its own, natural name order, and the reader on files
// written here with the C API (types h5py does not write: big-endian floats, bfloat16 as a float
// layout and as an opaque type, unsigned 16-bit), read back in pieces far smaller than a row.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <unistd.h>

#include "accuracy/hdf5_dump.h"
#include "accuracy/hdf5_types.h"
#include "core/subprocess.h"

namespace portkit::accuracy {
namespace {
namespace fs = std::filesystem;

Hdf5TypeInfo Float(size_t size, size_t spos, size_t epos, size_t esize, size_t msize, size_t bias) {
  Hdf5TypeInfo t;
  t.cls = Hdf5TypeInfo::Class::kFloat;
  t.size = size;
  t.precision = size * 8;
  t.sign_pos = spos;
  t.exp_pos = epos;
  t.exp_size = esize;
  t.mant_pos = 0;
  t.mant_size = msize;
  t.exp_bias = bias;
  return t;
}

Hdf5TypeInfo Int(size_t size, bool is_signed) {
  Hdf5TypeInfo t;
  t.cls = Hdf5TypeInfo::Class::kInteger;
  t.size = size;
  t.precision = size * 8;
  t.is_signed = is_signed;
  return t;
}

DType Mapped(const Hdf5TypeInfo& t) {
  auto m = MapHdf5Type(t);
  return m.ok() ? m->dtype : DType::kUnknown;
}

TEST(Hdf5TypesTest, IeeeFloatsByLayoutInEitherByteOrder) {
  EXPECT_EQ(Mapped(Float(8, 63, 52, 11, 52, 1023)), DType::kF64);
  EXPECT_EQ(Mapped(Float(4, 31, 23, 8, 23, 127)), DType::kF32);
  EXPECT_EQ(Mapped(Float(2, 15, 10, 5, 10, 15)), DType::kF16);
  EXPECT_EQ(Mapped(Float(2, 15, 7, 8, 7, 127)), DType::kBF16);
  Hdf5TypeInfo be = Float(4, 31, 23, 8, 23, 127);
  be.big_endian = true;
  EXPECT_EQ(Mapped(be), DType::kF32);
}

TEST(Hdf5TypesTest, OtherFloatLayoutsAreRefusedWithTheLayoutInTheMessage) {
  auto x87 = MapHdf5Type(Float(16, 79, 64, 15, 64, 16383));  // long double
  ASSERT_FALSE(x87.ok());
  EXPECT_EQ(x87.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(x87.status().message().find("128-bit float"), std::string::npos);
  Hdf5TypeInfo odd_bias = Float(2, 15, 10, 5, 10, 14);
  EXPECT_FALSE(MapHdf5Type(odd_bias).ok());
}

TEST(Hdf5TypesTest, IntegersAndTheirWidening) {
  EXPECT_EQ(Mapped(Int(1, true)), DType::kI8);
  EXPECT_EQ(Mapped(Int(2, true)), DType::kI16);
  EXPECT_EQ(Mapped(Int(4, true)), DType::kI32);
  EXPECT_EQ(Mapped(Int(8, true)), DType::kI64);
  EXPECT_EQ(Mapped(Int(1, false)), DType::kU8);
  auto u16 = MapHdf5Type(Int(2, false));
  ASSERT_TRUE(u16.ok());
  EXPECT_EQ(u16->dtype, DType::kI32);
  EXPECT_TRUE(u16->widened);
  EXPECT_EQ(Mapped(Int(4, false)), DType::kI64);
  auto u64 = MapHdf5Type(Int(8, false));
  ASSERT_FALSE(u64.ok());
  EXPECT_NE(u64.status().message().find("unsigned 64-bit integer"), std::string::npos);
  Hdf5TypeInfo padded = Int(4, true);
  padded.precision = 24;
  EXPECT_FALSE(MapHdf5Type(padded).ok());
}

TEST(Hdf5TypesTest, EnumsBoolOpaqueAndOthers) {
  Hdf5TypeInfo b = Int(1, true);
  b.cls = Hdf5TypeInfo::Class::kEnum;
  b.members = {{"FALSE", 0}, {"TRUE", 1}};
  EXPECT_EQ(Mapped(b), DType::kBool);
  b.members = {{"RED", 0}, {"GREEN", 1}};
  EXPECT_EQ(Mapped(b), DType::kI8);  // any other enum: its integer values
  Hdf5TypeInfo op;
  op.cls = Hdf5TypeInfo::Class::kOpaque;
  op.size = 2;
  op.tag = "bfloat16";
  EXPECT_EQ(Mapped(op), DType::kBF16);
  op.tag = "my blob";
  EXPECT_FALSE(MapHdf5Type(op).ok());
  Hdf5TypeInfo s;
  s.class_name = "string";
  auto str = MapHdf5Type(s);
  ASSERT_FALSE(str.ok());
  EXPECT_NE(str.status().message().find("string type"), std::string::npos);
}

TEST(Hdf5TypesTest, NaturalOrder) {
  std::vector<std::string> v = {"10", "2", "1", "b", "a10", "a9", "a09", "input_10", "input_2"};
  std::sort(v.begin(), v.end(), NaturalLess);
  EXPECT_EQ(v, (std::vector<std::string>{"1", "2", "10", "a09", "a9", "a10", "b", "input_2", "input_10"}));
  EXPECT_FALSE(NaturalLess("x", "x"));
  EXPECT_TRUE(NaturalLess("x", "x1"));
  EXPECT_FALSE(NaturalLess("x1", "x"));
}

class Hdf5FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_hdf5_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void Write(hid_t file, const char* path, hid_t file_type, hid_t mem_type, std::vector<hsize_t> dims,
                    const void* data, bool chunked = false) {
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunked) {
      std::vector<hsize_t> chunk(dims.size(), 2);
      H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
    }
    hid_t space =
        dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    hid_t ds = H5Dcreate2(file, path, file_type, space, lcpl, dcpl, H5P_DEFAULT);
    ASSERT_GE(ds, 0) << path;
    ASSERT_GE(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0) << path;
    H5Dclose(ds);
    H5Sclose(space);
    H5Pclose(dcpl);
    H5Pclose(lcpl);
  }

  static std::vector<uint8_t> ReadAll(const Hdf5File& f, const Hdf5Tensor& t, size_t max_bytes, size_t* pieces) {
    std::vector<uint8_t> all;
    *pieces = 0;
    Status st = f.Read(t, max_bytes, [&](const uint8_t* d, size_t n) {
      all.insert(all.end(), d, d + n * DTypeSize(t.dtype));
      ++*pieces;
      return Status::Ok();
    });
    EXPECT_TRUE(st.ok()) << st.message();
    return all;
  }

  fs::path dir_;
};

TEST_F(Hdf5FileTest, ReadsTypesInPiecesSmallerThanARowAndInOrder) {
  fs::path path = dir_ / "dump.h5";
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  std::vector<float> f32(2 * 3 * 5);
  std::iota(f32.begin(), f32.end(), -7.5f);
  Write(file, "/mul/3/input/0", H5T_IEEE_F32BE, H5T_NATIVE_FLOAT, {2, 3, 5}, f32.data(), /*chunked=*/true);
  std::vector<uint16_t> u16 = {0, 1, 65535, 40000};
  Write(file, "/mul/3/input/1", H5T_STD_U16BE, H5T_NATIVE_UINT16, {4}, u16.data());
  // bfloat16 as a float layout (1-8-7, bias 127), little-endian: 1.0, -2.0, 0.5.
  hid_t bf16 = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(bf16, 15, 7, 8, 0, 7);
  H5Tset_size(bf16, 2);
  H5Tset_ebias(bf16, 127);
  std::vector<uint16_t> bf16_bits = {0x3F80, 0xC000, 0x3F00};
  Write(file, "/mul/3/output/0", bf16, bf16, {3}, bf16_bits.data());
  H5Tclose(bf16);
  hid_t opaque = H5Tcreate(H5T_OPAQUE, 2);
  H5Tset_tag(opaque, "bfloat16");
  Write(file, "/mul/3/output/1", opaque, opaque, {3}, bf16_bits.data());
  H5Tclose(opaque);
  int8_t flags[3] = {0, 1, 1};
  Write(file, "/mul/3/output/2", H5T_STD_I8LE, H5T_NATIVE_INT8, {3}, flags);
  {  // The Ascend dumper's marks: bool stored as int8.
    hid_t ds = H5Dopen2(file, "/mul/3/output/2", H5P_DEFAULT);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t at = H5Acreate2(ds, "DataType", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    int32_t nine = 9;
    H5Awrite(at, H5T_NATIVE_INT32, &nine);
    H5Aclose(at);
    H5Sclose(sp);
    H5Dclose(ds);
  }
  H5Fclose(file);

  auto f = Hdf5File::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto listing = f->List();
  ASSERT_TRUE(listing.ok()) << listing.status().message();
  EXPECT_TRUE(listing->errors.empty());
  ASSERT_EQ(listing->tensors.size(), 5u);
  const auto& t = listing->tensors;
  EXPECT_EQ(t[0].path, "/mul/3/input/0");
  EXPECT_EQ(t[0].dtype, DType::kF32);
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{2, 3, 5}));
  EXPECT_EQ(t[1].dtype, DType::kI32);
  EXPECT_FALSE(t[1].stored.empty());
  EXPECT_EQ(t[2].role, "output");
  EXPECT_EQ(t[2].index, 0u);
  EXPECT_EQ(t[2].dtype, DType::kBF16);
  EXPECT_EQ(t[3].dtype, DType::kBF16);
  EXPECT_EQ(t[4].dtype, DType::kBool);

  size_t pieces = 0;
  for (size_t max_bytes : {size_t{1}, size_t{12}, size_t{40}, size_t{1} << 20}) {
    auto bytes = ReadAll(*f, t[0], max_bytes, &pieces);
    ASSERT_EQ(bytes.size(), f32.size() * 4);
    EXPECT_EQ(std::memcmp(bytes.data(), f32.data(), bytes.size()), 0) << "max_bytes " << max_bytes;
    if (max_bytes == 12) EXPECT_EQ(pieces, 2u * 3u * 2u);  // 3 then 2 elements of each row of 5
    if (max_bytes == 40) EXPECT_EQ(pieces, 2u * 2u);       // 2 rows then 1 row of each 3x5 block
    if (max_bytes == (size_t{1} << 20)) EXPECT_EQ(pieces, 1u);
  }
  auto widened = ReadAll(*f, t[1], 8, &pieces);
  std::vector<int32_t> expect = {0, 1, 65535, 40000};
  ASSERT_EQ(widened.size(), 16u);
  EXPECT_EQ(std::memcmp(widened.data(), expect.data(), 16), 0);
  for (size_t i : {2, 3}) {
    auto bf = ReadAll(*f, t[i], 2, &pieces);
    ASSERT_EQ(bf.size(), 6u);
    EXPECT_EQ(std::memcmp(bf.data(), bf16_bits.data(), 6), 0);
  }
  auto b = ReadAll(*f, t[4], 100, &pieces);
  EXPECT_EQ(b, (std::vector<uint8_t>{0, 1, 1}));
}

TEST_F(Hdf5FileTest, NotHdf5AndTruncatedFilesAreErrorsNamingTheFile) {
  fs::path text = dir_ / "notes.h5";
  std::ofstream(text) << "not hdf5\n";
  auto a = Hdf5File::Open(text);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find(text.string()), std::string::npos);
  EXPECT_NE(a.status().message().find("not an HDF5 file"), std::string::npos);

  fs::path full = dir_ / "full.h5";
  hid_t file = H5Fcreate(full.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  std::vector<double> v(4096, 1.0);
  Write(file, "/op/0/output/0", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {v.size()}, v.data());
  H5Fclose(file);
  fs::path cut = dir_ / "cut.h5";
  fs::copy_file(full, cut);
  fs::resize_file(cut, fs::file_size(full) / 2);
  auto b = Hdf5File::Open(cut);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find(cut.string()), std::string::npos);
  EXPECT_NE(b.status().message().find("truncated"), std::string::npos) << b.status().message();
}

TEST_F(Hdf5FileTest, RunIsolatedTurnsACrashIntoAnErrorAndRemovesItsTemporaryFiles) {
  auto ok = RunIsolated(dir_ / "a.h5", {dir_}, [](int fd) {
    std::string report;
    AppendRecord(report, "42");
    AppendRecord(report, std::string("with\0nul", 8));
    AppendRecord(report, "");
    return WriteAllToFd(fd, report.data(), report.size()) ? 3 : 99;
  });
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->exit_code, 3);
  EXPECT_EQ(ReadRecords(ok->report), (std::vector<std::string>{"42", std::string("with\0nul", 8), ""}));

  fs::path keep = dir_ / "other.npy.tmp.1";  // not the child's: left alone
  std::ofstream(keep) << "x";
  auto crashed = RunIsolated(dir_ / "b.h5", {dir_}, [&](int) {
    std::ofstream(dir_ / ("half.npy.tmp." + std::to_string(::getpid()))) << "partial";
    std::raise(SIGSEGV);
    return 0;
  });
  ASSERT_FALSE(crashed.ok());
  EXPECT_EQ(crashed.status().code(), ErrorCode::kParse);
  EXPECT_NE(crashed.status().message().find((dir_ / "b.h5").string()), std::string::npos);
  EXPECT_NE(crashed.status().message().find("crashed"), std::string::npos);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir_)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"other.npy.tmp.1"});
}

TEST(Hdf5RecordsTest, ACutRecordIsDropped) {
  std::string r;
  AppendRecord(r, "abc");
  AppendRecord(r, "defgh");
  EXPECT_EQ(ReadRecords(r.substr(0, r.size() - 1)), std::vector<std::string>{"abc"});
  EXPECT_TRUE(ReadRecords("").empty());
}

TEST(Hdf5NamesTest, PrintableNameEscapesControlAndInvalidUtf8Only) {
  EXPECT_EQ(PrintableName("conv2d"), "conv2d");
  EXPECT_EQ(PrintableName("\xe5\x8d\xb7\xe7\xa7\xaf"), "\xe5\x8d\xb7\xe7\xa7\xaf");  // valid UTF-8 kept
  EXPECT_EQ(PrintableName(std::string("a\nb\x01", 4)), "a\\x0ab\\x01");
  EXPECT_EQ(PrintableName("x\xbd\xff"), "x\\xbd\\xff");
  EXPECT_EQ(PrintableName("\xe5\x8d"), "\\xe5\\x8d");  // truncated sequence
}

}  // namespace
}  // namespace portkit::accuracy
