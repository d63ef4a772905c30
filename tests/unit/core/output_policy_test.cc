// The overwrite policy of src/core/output_policy.h (docs/safety.md "Outputs").
#include "core/output_policy.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace portkit {
namespace {

namespace fs = std::filesystem;

class OutputPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/portkit_output_policy_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void Write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  fs::path dir_;
};

TEST_F(OutputPolicyTest, MissingFileMayBeWritten) { EXPECT_TRUE(CheckReplaceable(dir_ / "t.json", "-o", false).ok()); }

TEST_F(OutputPolicyTest, UsersFileIsRefusedWithoutForce) {
  Write(dir_ / "train.py", "print(1)\n");
  Status st = CheckReplaceable(dir_ / "train.py", "-o", false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "-o " + (dir_ / "train.py").string() +
                              " already exists and portkit did not write it; give another name, or --force to "
                              "replace it");
  EXPECT_TRUE(CheckReplaceable(dir_ / "train.py", "-o", true).ok());
}

TEST_F(OutputPolicyTest, FileListedInTheLedgerMayBeReplaced) {
  Write(dir_ / "timeline.json", "{}");
  ASSERT_TRUE(RecordWrittenFile(dir_ / "timeline.json").ok());
  EXPECT_TRUE(CheckReplaceable(dir_ / "timeline.json", "-o", false).ok());
  EXPECT_EQ(WrittenFiles(dir_), std::vector<std::string>{"timeline.json"});
  // Recording again keeps one line per name, sorted.
  ASSERT_TRUE(RecordWritten(dir_, {"b.csv", "timeline.json", "a.csv"}).ok());
  EXPECT_EQ(WrittenFiles(dir_), (std::vector<std::string>{"a.csv", "b.csv", "timeline.json"}));
}

TEST_F(OutputPolicyTest, LedgerNamesWithFoldersAreIgnored) {
  Write(dir_ / ".portkit-files", "../escape.py\n/etc/passwd\nsub/x.csv\n..\nok.csv\n");
  EXPECT_EQ(WrittenFiles(dir_), std::vector<std::string>{"ok.csv"});
}

TEST_F(OutputPolicyTest, LinkedLedgerIsNotRead) {
  Write(dir_ / "elsewhere", "train.py\n");
  fs::create_symlink(dir_ / "elsewhere", dir_ / ".portkit-files");
  Write(dir_ / "train.py", "print(1)\n");
  EXPECT_TRUE(WrittenFiles(dir_).empty());
  EXPECT_FALSE(CheckReplaceable(dir_ / "train.py", "-o", false).ok());
}

TEST_F(OutputPolicyTest, LinksFoldersAndFifosAreRefusedEvenWithForce) {
  Write(dir_ / "target", "x");
  fs::create_symlink(dir_ / "target", dir_ / "link.json");
  fs::create_directory(dir_ / "folder.json");
  ASSERT_EQ(::mkfifo((dir_ / "fifo.json").c_str(), 0600), 0);
  for (const char* name : {"link.json", "folder.json", "fifo.json"})
    EXPECT_FALSE(CheckReplaceable(dir_ / name, "-o", true).ok()) << name;
}

TEST_F(OutputPolicyTest, CheckInFolderNamesTheFirstRefusedFile) {
  Write(dir_ / "compare_result.csv", "user's");
  Status st = CheckReplaceableIn(dir_, {"compare_result.json", "compare_result.csv"}, "-o", false);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("compare_result.csv already exists"), std::string::npos);
  EXPECT_TRUE(CheckReplaceableIn(dir_ / "not_yet", {"a.csv"}, "-o", false).ok());
}

}  // namespace
}  // namespace portkit
