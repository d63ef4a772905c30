#include "core/context.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace portkit {
namespace {

namespace fs = std::filesystem;

/// Sets (or with nullptr unsets) an environment variable for one test, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = std::string(old);
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

const fs::path kSource = fs::path(PORTKIT_TEST_DATA_DIR).parent_path();

TEST(FindPythonDir, EnvironmentVariableWins) {
  ScopedEnv env("PORTKIT_PYTHON_DIR", "/opt/elsewhere/python");
  EXPECT_EQ(FindPythonDir(), fs::path("/opt/elsewhere/python"));
}

TEST(FindPythonDir, BinaryInItsBuildFolderUsesTheSourceCompanion) {
  ScopedEnv env("PORTKIT_PYTHON_DIR", nullptr);
  fs::path dir = FindPythonDir();
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(fs::exists(dir / "portkit" / "__init__.py"));
  EXPECT_EQ(fs::canonical(dir), fs::canonical(kSource / "python"));
}

TEST(FindDataDir, EnvironmentFoldersComeBeforeTheShippedData) {
  const fs::path shipped = fs::canonical(kSource / "data");
  {
    ScopedEnv env("PORTKIT_DATA_DIR", "/opt/elsewhere/data");
    DataDirs data = FindDataDir();
    ASSERT_EQ(data.dirs().size(), 2u);
    EXPECT_EQ(data.dirs()[0], fs::path("/opt/elsewhere/data"));
    EXPECT_EQ(fs::canonical(data.shipped()), shipped);
  }
  {
    ScopedEnv env("PORTKIT_DATA_DIR", "/a::/b:");  // empty entries are skipped
    DataDirs data = FindDataDir();
    ASSERT_EQ(data.dirs().size(), 3u);
    EXPECT_EQ(data.dirs()[0], fs::path("/a"));
    EXPECT_EQ(data.dirs()[1], fs::path("/b"));
    EXPECT_EQ(data.Describe(), "/a:/b:" + data.shipped().string());
    // A file none of the overlays holds comes from the shipped data.
    EXPECT_EQ(fs::canonical(data.Find("cuda/cuda_only.json")), shipped / "cuda" / "cuda_only.json");
  }
  {
    ScopedEnv env("PORTKIT_DATA_DIR", shipped.c_str());  // naming the shipped data: searched once
    EXPECT_EQ(FindDataDir().dirs().size(), 1u);
  }
  ScopedEnv env("PORTKIT_DATA_DIR", nullptr);
  DataDirs data = FindDataDir();
  ASSERT_EQ(data.dirs().size(), 1u);
  EXPECT_EQ(fs::canonical(data.shipped()), shipped);
}

}  // namespace
}  // namespace portkit
