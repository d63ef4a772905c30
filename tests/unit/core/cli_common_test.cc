#include "cli/cli_common.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace portkit::cli {
namespace {
namespace fs = std::filesystem;

TEST(ExitCodes, OneTableForEveryCommand) {
  EXPECT_EQ(ExitCodeFor(Status::Ok()), 0);
  EXPECT_EQ(ExitCodeFor(InvalidArgument("x")), 2);
  EXPECT_EQ(ExitCodeFor(NotFound("x")), 2);
  EXPECT_EQ(ExitCodeFor(IoError("x")), 2);
  EXPECT_EQ(ExitCodeFor(ParseError("x")), 2);
  EXPECT_EQ(ExitCodeFor(Status(ErrorCode::kUnsupported, "x")), 2);
  EXPECT_EQ(ExitCodeFor(Status(ErrorCode::kInternal, "x")), 4);
}

TEST(Parse, RewritesCompatibilitySpellings) {
  CLI::App app;
  std::string env, dir;
  int job_type = 0;
  app.add_option("--env-path", env);
  app.add_option("--dir", dir);
  app.add_option("--job-type", job_type);
  const char* argv[] = {"portkit x", "-env", "/e", "-dir", "/d", "--job_type=1"};
  auto rc = Parse(app, 6, const_cast<char**>(argv));
  EXPECT_FALSE(rc.has_value());
  EXPECT_EQ(env, "/e");
  EXPECT_EQ(dir, "/d");
  EXPECT_EQ(job_type, 1);
}

TEST(Parse, FormatAndJobsAreValidated) {
  CLI::App app;
  std::vector<std::string> formats;
  int jobs = 0;
  AddFormatOption(app, &formats, {"csv", "json"}, {"csv"});
  AddJobsOption(app, &jobs);
  const char* ok[] = {"x", "--format", "json,csv,json", "-j", "3"};
  EXPECT_FALSE(Parse(app, 5, const_cast<char**>(ok)).has_value());
  EXPECT_EQ(formats, (std::vector<std::string>{"json", "csv"}));
  EXPECT_EQ(jobs, 3);
  CLI::App app2;
  AddFormatOption(app2, &formats, {"csv", "json"}, {"csv"});
  const char* bad[] = {"x", "--format", "xml"};
  EXPECT_EQ(Parse(app2, 3, const_cast<char**>(bad)), std::optional<int>(kExitUsage));
  for (const char* j : {"0", "-3"}) {
    CLI::App app3;
    AddJobsOption(app3, &jobs);
    const char* badj[] = {"x", "-j", j};
    EXPECT_EQ(Parse(app3, 3, const_cast<char**>(badj)), std::optional<int>(kExitUsage)) << j;
  }
}

TEST(Paths, InputAndOutputChecks) {
  char tmpl[] = "/tmp/portkit_cli_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  fs::path dir = tmpl;
  std::ofstream(dir / "file") << "x";
  EXPECT_EQ(CheckInput(dir / "missing", "-i").message(), "-i " + (dir / "missing").string() + " does not exist");
  EXPECT_TRUE(CheckInput(dir / "file", "-i", PathKind::kFile).ok());
  EXPECT_EQ(CheckInput(dir / "file", "-i", PathKind::kDirectory).code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(CheckOutputFolder(dir / "new" / "deeper", "-o").ok());
  EXPECT_FALSE(fs::exists(dir / "new"));  // nothing created
  Status under_file = CheckOutputFolder(dir / "file" / "out", "-o");
  EXPECT_EQ(under_file.code(), ErrorCode::kIo);
  EXPECT_NE(under_file.message().find("is not a folder"), std::string::npos);
  EXPECT_EQ(CheckOutputFolder("/proc/portkit-x", "--output").code(), ErrorCode::kIo);
  EXPECT_EQ(CheckOutputFile(dir, "--output").code(), ErrorCode::kInvalidArgument);
  // No probe folder is left behind.
  size_t entries = 0;
  for (auto& e : fs::directory_iterator(dir)) entries += e.path().filename() != "file";
  EXPECT_EQ(entries, 0u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace portkit::cli
