// The safety policies of src/core/input_files.h (docs/safety.md), one test per rule.
#include "core/input_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/atomic_file.h"
#include "core/unified_diff.h"

namespace portkit {
namespace {

namespace fs = std::filesystem;

class InputFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/portkit_input_files_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void Write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  fs::path dir_;
};

TEST_F(InputFilesTest, FifoIsRefusedWithoutBlocking) {
  fs::path fifo = dir_ / "op_000000.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto start = std::chrono::steady_clock::now();
  auto fd = OpenInputFile(fifo);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(fd.status().message(), fifo.string() + ": not a regular file (a FIFO); not read");
  // Every reader built on it refuses too.
  EXPECT_FALSE(ReadFile(fifo).ok());
  EXPECT_EQ(DescribeFileType(fifo), "a FIFO");
}

TEST_F(InputFilesTest, FolderIsRefused) {
  auto fd = OpenInputFile(dir_);
  ASSERT_FALSE(fd.ok());
  EXPECT_NE(fd.status().message().find("not a regular file (a folder)"), std::string::npos);
}

TEST_F(InputFilesTest, LinkIsRefusedWhenAsked) {
  Write(dir_ / "outside" / "secret", "s3cret");
  fs::create_symlink(dir_ / "outside" / "secret", dir_ / "link");
  EXPECT_TRUE(OpenInputFile(dir_ / "link", Links::kFollow).ok());
  auto fd = OpenInputFile(dir_ / "link", Links::kRefuse);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().message(), (dir_ / "link").string() + ": is a symbolic link; not followed");
}

TEST_F(InputFilesTest, SymlinkedPathIsRefused) {
  fs::create_directories(dir_ / "real");
  fs::create_directory_symlink(dir_ / "real", dir_ / "alias");
  EXPECT_TRUE(RefuseSymlinkedPath(dir_ / "real", "-i").ok());
  Status st = RefuseSymlinkedPath(dir_ / "alias", "-i");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "-i " + (dir_ / "alias").string() + " is a symbolic link (to " + (dir_ / "real").string() +
                              "); give the path it points to (links are never followed)");
  // "alias/" still names the link.
  EXPECT_FALSE(RefuseSymlinkedPath((dir_ / "alias").string() + "/", "-i").ok());
  // A link in a parent folder is the user's layout.
  EXPECT_TRUE(RefuseSymlinkedPath(dir_ / "alias" / "x", "-i").ok());
}

TEST_F(InputFilesTest, WalkNeverFollowsLinksNorEntersOutputs) {
  Write(dir_ / "root" / "a.py", "x");
  Write(dir_ / "root" / "sub" / "b.py", "y");
  Write(dir_ / "outside" / "secret.py", "z");
  fs::create_directory_symlink(dir_ / "outside", dir_ / "root" / "etc");
  fs::create_symlink(dir_ / "outside" / "secret.py", dir_ / "root" / "s.py");
  ASSERT_EQ(::mkfifo((dir_ / "root" / "f.py").c_str(), 0644), 0);
  Write(dir_ / "root" / "old_msft" / "c.py", "c");
  ASSERT_TRUE(MarkOutput(dir_ / "root" / "old_msft", "migrate").ok());
  std::vector<std::string> seen;
  for (const auto& e : WalkInputTree(dir_ / "root"))
    seen.push_back(e.rel + ":" + std::to_string(static_cast<int>(e.kind)));
  // Sorted: a.py, etc (link), f.py (FIFO), old_msft (output), s.py (link), sub/b.py.
  EXPECT_EQ(seen, (std::vector<std::string>{"a.py:0", "etc:1", "f.py:2", "old_msft:3", "s.py:1", "sub/b.py:0"}));
}

TEST_F(InputFilesTest, MarkerListsFilesInsideOnly) {
  fs::create_directories(dir_ / "out");
  ASSERT_TRUE(MarkOutput(dir_ / "out", "migrate", {"a.py", "../../etc/passwd", "/abs", "pkg/b.py"}).ok());
  EXPECT_EQ(MarkedOutputCommand(dir_ / "out"), "migrate");
  EXPECT_EQ(MarkedOutputFiles(dir_ / "out"), (std::vector<std::string>{"a.py", "pkg/b.py"}));
  EXPECT_EQ(MarkedOutputCommand(dir_), "");
}

TEST(SafeFileName, NeverLeavesTheFolder) {
  EXPECT_EQ(SafeFileName("/../../../escaped"), "_.._.._.._escaped");
  EXPECT_EQ(SafeFileName(".."), "_.");
  EXPECT_EQ(SafeFileName(""), "_");
  EXPECT_EQ(SafeFileName("a\\b\nc"), "a_b_c");
  EXPECT_EQ(SafeFileName("op.input.0.npy"), "op.input.0.npy");
  EXPECT_EQ(SafeFileName("ünï"), "ünï");
  std::string long_name(300, 'x');
  EXPECT_EQ(SafeFileName(long_name).size(), 200u);
  std::string utf8 = std::string(199, 'x') + "é";  // é is 2 bytes, cut before it
  EXPECT_EQ(SafeFileName(utf8), std::string(199, 'x'));
}

TEST(IsContainedRelativePath, RefusesEscapes) {
  EXPECT_TRUE(IsContainedRelativePath("a/b.py"));
  EXPECT_FALSE(IsContainedRelativePath("../a"));
  EXPECT_FALSE(IsContainedRelativePath("a/../../b"));
  EXPECT_FALSE(IsContainedRelativePath("/etc/passwd"));
  EXPECT_FALSE(IsContainedRelativePath(""));
  EXPECT_FALSE(IsContainedRelativePath("a//b"));
}

TEST(PythonStringLiteral, EscapesLikeRepr) {
  EXPECT_EQ(PythonStringLiteral("proj"), "'proj'");
  EXPECT_EQ(PythonStringLiteral("x\"; import os; os.system(\"touch PWNED\"); \""),
            "'x\"; import os; os.system(\"touch PWNED\"); \"'");
  EXPECT_EQ(PythonStringLiteral("it's"), "\"it's\"");
  EXPECT_EQ(PythonStringLiteral("a'b\"c"), "'a\\'b\"c'");
  EXPECT_EQ(PythonStringLiteral("line\nbreak\\"), "'line\\nbreak\\\\'");
  EXPECT_EQ(PythonStringLiteral(std::string("nul\0bell\x07", 9)), "'nul\\x00bell\\x07'");
  EXPECT_EQ(PythonStringLiteral("日本語"), "'日本語'");
  EXPECT_EQ(PythonStringLiteral("bad\xff"), "'bad\\ufffd'");
  EXPECT_EQ(PythonStringLiteral("\xe2\x80\xa8"), "'\\u2028'");
}

TEST(ShellQuote, QuotesAnythingUnsafe) {
  EXPECT_EQ(ShellQuote("/tmp/out_analysis"), "/tmp/out_analysis");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("x'; rm -rf ~; '"), "'x'\\''; rm -rf ~; '\\'''");
  EXPECT_EQ(ShellQuote("$(id)"), "'$(id)'");
  EXPECT_EQ(ShellQuote(""), "''");
}

TEST_F(InputFilesTest, CopyFileAtomicSaysWhy) {
  Status st = CopyFileAtomic(dir_ / "missing.py", dir_ / "copy.py");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), (dir_ / "missing.py").string() + ": cannot open: No such file or directory");
  Write(dir_ / "a.py", "x");
  st = CopyFileAtomic(dir_ / "a.py", dir_ / "no" / "such" / "copy.py");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), (dir_ / "a.py").string() + ": cannot copy to " + (dir_ / "no/such/copy.py").string() +
                              ": No such file or directory");
  EXPECT_EQ(st.message().find("Success"), std::string::npos);
}

TEST_F(InputFilesTest, CopyFileAtomicNeverDereferencesALink) {
  Write(dir_ / "outside" / "shadow", "root:x");
  fs::create_symlink(dir_ / "outside" / "shadow", dir_ / "link");
  Status st = CopyFileAtomic(dir_ / "link", dir_ / "copy");
  ASSERT_FALSE(st.ok());
  EXPECT_FALSE(fs::exists(dir_ / "copy"));
  ASSERT_TRUE(CopySymlinkAtomic(dir_ / "link", dir_ / "copy").ok());
  EXPECT_TRUE(fs::is_symlink(dir_ / "copy"));
  EXPECT_EQ(fs::read_symlink(dir_ / "copy"), dir_ / "outside" / "shadow");
}

TEST_F(InputFilesTest, CopyFileAtomicKeepsTheMode) {
  Write(dir_ / "run.sh", "#!/bin/sh\n");
  fs::permissions(dir_ / "run.sh", fs::perms::owner_all);
  ASSERT_TRUE(CopyFileAtomic(dir_ / "run.sh", dir_ / "copy.sh").ok());
  EXPECT_EQ(fs::status(dir_ / "copy.sh").permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(*ReadFile(dir_ / "copy.sh"), "#!/bin/sh\n");
}

// Code this process loads (tune's kernel cache): only from folders and files nobody else can write.
TEST_F(InputFilesTest, PrivateFoldersAndCode) {
  fs::create_directories(dir_ / "k");
  fs::permissions(dir_ / "k", fs::perms(0755));
  EXPECT_TRUE(CheckPrivateFolder(dir_ / "k", "the kernel cache").ok());
  fs::permissions(dir_ / "k", fs::perms(0777));
  Status st = CheckPrivateFolder(dir_ / "k", "the kernel cache");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("the kernel cache " + (dir_ / "k").string() + " is writable by everyone (mode 0777)"),
            std::string::npos)
      << st.message();
  fs::permissions(dir_ / "k", fs::perms(0775));
  st = CheckPrivateFolder(dir_ / "k", "the kernel cache");
  EXPECT_NE(st.message().find("is writable by its group (mode 0775)"), std::string::npos) << st.message();
  ::chmod((dir_ / "k").c_str(), 01777);  // sticky, as /tmp: accepted
  EXPECT_TRUE(CheckPrivateFolder(dir_ / "k", "the kernel cache").ok());
  fs::create_directory_symlink(dir_ / "k", dir_ / "link");
  EXPECT_NE(CheckPrivateFolder(dir_ / "link", "x").message().find("is a symbolic link"), std::string::npos);

  Write(dir_ / "k" / "a.so", "code");
  fs::permissions(dir_ / "k" / "a.so", fs::perms(0644));
  auto fd = OpenPrivateCode(dir_ / "k" / "a.so");
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  EXPECT_EQ(ProcFdPath(fd->get()), "/proc/self/fd/" + std::to_string(fd->get()));
  fs::permissions(dir_ / "k" / "a.so", fs::perms(0664));
  auto group = OpenPrivateCode(dir_ / "k" / "a.so");
  ASSERT_FALSE(group.ok());
  EXPECT_NE(group.status().message().find("is writable by its group (mode 0664): someone else could have written its "
                                          "code; not loaded"),
            std::string::npos)
      << group.status().message();
  fs::create_symlink(dir_ / "k" / "a.so", dir_ / "k" / "b.so");
  EXPECT_FALSE(OpenPrivateCode(dir_ / "k" / "b.so").ok());
  if (::geteuid() == 0) {  // as root: a file of another user is refused
    fs::permissions(dir_ / "k" / "a.so", fs::perms(0644));
    ASSERT_EQ(::chown((dir_ / "k" / "a.so").c_str(), 65534, 65534), 0);
    auto other = OpenPrivateCode(dir_ / "k" / "a.so");
    ASSERT_FALSE(other.ok());
    EXPECT_NE(other.status().message().find("is owned by uid 65534, not by you (uid 0) or root"), std::string::npos);
  }
}

// Room for a copy: apparent sizes (a sparse file in full) against the free space.
TEST_F(InputFilesTest, FreeSpaceAndSparseFiles) {
  Write(dir_ / "small.py", std::string(1000, 'x'));
  { std::ofstream sparse(dir_ / "sparse.py"); }
  fs::resize_file(dir_ / "sparse.py", 64u << 20);  // 64 MiB of hole
  CopySize size = MeasureCopy({dir_ / "small.py", dir_ / "sparse.py", dir_ / "missing.py"});
  EXPECT_EQ(size.bytes, 1000u + (64u << 20));
  ASSERT_EQ(size.sparse.size(), 1u);
  EXPECT_NE(size.sparse[0].find("sparse.py: a sparse file: 67.1 MB long, 0.0 MB on disk"), std::string::npos)
      << size.sparse[0];
  auto real = FreeBytes(dir_);
  ASSERT_TRUE(real.ok());
  EXPECT_GT(*real, 0u);
  ::setenv("PORTKIT_TEST_FREE_BYTES", "5000000", 1);
  EXPECT_EQ(*FreeBytes(dir_ / "not" / "yet"), 5000000u);
  Status st = CheckFreeSpace(dir_ / "out", size.bytes, "the migrated copy");
  ::unsetenv("PORTKIT_TEST_FREE_BYTES");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "not enough free space: the migrated copy writes 67.1 MB (67109864 bytes) into " +
                              (dir_ / "out").string() +
                              ", which has 5.0 MB (5000000 bytes) free; nothing was copied. Free some space or give "
                              "another output folder");
  EXPECT_TRUE(CheckFreeSpace(dir_, 1000, "x").ok());
}

TEST(UnifiedDiffHeader, NamesWithSpacesAndQuotes) {
  EXPECT_EQ(UnifiedDiff("a\n", "b\n", "pkg/my file.py").substr(0, 44),
            "--- a/pkg/my file.py\t\n+++ b/pkg/my file.py\t\n");
  EXPECT_EQ(UnifiedDiff("a\n", "b\n", "x\"y.py").substr(0, 32), "--- \"a/x\\\"y.py\"\n+++ \"b/x\\\"y.py\"\n");
  EXPECT_EQ(UnifiedDiff("a\n", "b\n", "plain.py").substr(0, 30), "--- a/plain.py\n+++ b/plain.py\n");
}

}  // namespace
}  // namespace portkit
