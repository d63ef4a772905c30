// Loading a project: the trees of the first files whose sources fit in the tree budget are kept
// from pass 1 to the end; the files past it are parsed again (TreeOf) and dropped (ReleaseTree).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "analyse/project_loader.h"
#include "core/log.h"
#include "core/thread_pool.h"

namespace portkit::analyse {
namespace {
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "portkit_loader_XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// A 100-byte Python file.
void WriteModule(const fs::path& p) {
  std::string text = "import torch\nx = torch.ones(2)\n";
  text += "# " + std::string(100 - text.size() - 3, 'p') + "\n";
  ASSERT_EQ(text.size(), 100u);
  std::ofstream(p) << text;
}

TEST(LoadProject, KeepsTheTreesOfTheFirstFilesWithinTheBudgetAndParsesTheOthersAgain) {
  TempDir dir;
  for (const char* name : {"a.py", "b.py", "c.py"}) WriteModule(dir.path() / name);
  LoadOptions opt;
  opt.input = dir.path();
  opt.display_prefix = "proj";
  opt.keep_trees_bytes = 250;  // a.py and b.py (200 bytes) fit, c.py does not
  Logger log{nullptr, SystemClock()};
  ThreadPool pool(1);
  LoadedProject project;
  LoadProject(opt, log, pool, project);
  ASSERT_EQ(project.py.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const PyFile& f = project.py[i];
    ASSERT_NE(f.summary, nullptr) << f.file->rel;
    EXPECT_EQ(f.keep_tree, i < 2) << f.file->rel;
    EXPECT_EQ(f.parsed.tree != nullptr, i < 2) << f.file->rel;  // c.py's tree was dropped after pass 1
  }
  EXPECT_EQ(project.py[2].file->rel, "c.py");

  PythonParser parser;
  PyFile& kept = project.py[0];
  TSTree* kept_tree = kept.parsed.tree;
  EXPECT_EQ(TreeOf(project, kept, parser)->tree, kept_tree);  // no second parse
  ReleaseTree(project, kept);
  EXPECT_EQ(kept.parsed.tree, kept_tree);

  PyFile& again = project.py[2];
  const ParsedSource* parsed = TreeOf(project, again, parser);
  ASSERT_NE(parsed, nullptr);
  ASSERT_NE(parsed->tree, nullptr);
  EXPECT_FALSE(parsed->has_error());
  EXPECT_EQ(ts_node_named_child_count(parsed->root()), ts_node_named_child_count(kept.parsed.root()));
  ReleaseTree(project, again);
  EXPECT_EQ(again.parsed.tree, nullptr);
  EXPECT_EQ(again.parsed.source.size(), 100u);  // the text stays for the next pass
}

}  // namespace
}  // namespace portkit::analyse
