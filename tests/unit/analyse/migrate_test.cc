// migrate's building blocks: edits applied with insertions first, line endings, the CPython
// check (one process for all files), the migrate rules of the target data, and RunMigrate undoing
// a file that a (fake) CPython rejects.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "analyse/api.h"
#include "analyse/migrate.h"
#include "analyse/python_check.h"
#include "analyse/source_files.h"
#include "core/atomic_file.h"
#include "core/context.h"
#include "core/log.h"
#include "target/migrate_rules.h"

namespace portkit::analyse {
namespace {
namespace fs = std::filesystem;

const fs::path kDataDir = PORTKIT_TEST_DATA_DIR;

class Scratch : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_migrate_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const fs::path& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel, std::ios::binary) << text;
  }
  fs::path dir_;
};

TEST(ApplyEdits, AnInsertionAtTheStartOfAnEditedRangeIsKept) {
  std::string text = "torch.cuda.x()\n";
  std::vector<Edit> edits = {{0, 10, "torch.npu", 1, 1, "FuncNameModify", ""},
                             {0, 0, "import torch_npu\n", 1, 1, "InsertImport", ""}};
  EXPECT_EQ(ApplyEdits(text, edits), "import torch_npu\ntorch.npu.x()\n");
  EXPECT_EQ(edits.size(), 2u);
}

TEST(ApplyEdits, AnInnerEditInsideAnOuterOneIsDropped) {
  std::string text = "f(a.b)";
  std::vector<Edit> edits = {{2, 5, "X", 1, 1, "", ""}, {4, 5, "c", 1, 1, "", ""}};
  EXPECT_EQ(ApplyEdits(text, edits), "f(X)");
  EXPECT_EQ(edits.size(), 1u);
}

TEST(LineEnding, FollowsTheFirstLine) {
  EXPECT_EQ(LineEnding("a\r\nb\n"), "\r\n");
  EXPECT_EQ(LineEnding("a\nb\r\n"), "\n");
  EXPECT_EQ(LineEnding("no line end"), "\n");
  EXPECT_EQ(LineEnding("a\rb\r"), "\r");
  EXPECT_EQ(LineOfByte("a\rb\r\nc\nd", 7), 4u);
  EXPECT_EQ(AfterLineEnd("a\r\nb", 0), 3u);
  EXPECT_EQ(AfterLineEnd("a\rb", 0), 2u);
}

// Latin-1 and cp1252 text decoded for the rewrite comes back as the file's own bytes.
TEST(EncodeSource, GivesBackEveryByteItDecoded) {
  std::string latin1, cp1252;
  for (int b = 1; b < 256; ++b) {
    latin1 += static_cast<char>(b);
    if (b != 0x81 && b != 0x8D && b != 0x8F && b != 0x90 && b != 0x9D) cp1252 += static_cast<char>(b);
  }
  for (auto [codec, bytes] : {std::pair<std::string, std::string>{"latin-1", latin1}, {"cp1252", cp1252}}) {
    std::string file = "# -*- coding: " + codec + " -*-\n" + bytes;
    std::string text = DecodeDeclaredLatin1(file);
    ASSERT_NE(text, file) << codec;
    EXPECT_EQ(FirstInvalidUtf8(text).first, 0u) << codec;
    auto back = EncodeSource(text + "import torch_npu\n", codec);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, file + "import torch_npu\n") << codec;
  }
  auto euro = EncodeSource("x = '\xe2\x82\xac'\n", "latin-1");  // U+20AC: cp1252 has it, Latin-1 not
  ASSERT_FALSE(euro.ok());
  EXPECT_EQ(euro.status().message(), "line 1: U+20AC cannot be written in latin-1");
  EXPECT_EQ(*EncodeSource("x = '\xe2\x82\xac'\n", "cp1252"), "x = '\x80'\n");
}

TEST(CompileWithPython, TellsABrokenEditFromABrokenOriginal) {
  std::vector<PythonCheckInput> inputs = {
      {"import os\n", "import os\n"},
      // An import above `from __future__`: tree-sitter parses it, CPython does not.
      {"import torch_npu\nfrom __future__ import annotations\n", "from __future__ import annotations\n"},
      {"print 'x'\n", "print 'x'\n"},
      {"# -*- coding: latin-1 -*-\ns = '\xe9'\n", "# -*- coding: latin-1 -*-\ns = '\xe9'\n"},
  };
  auto verdicts = CompileWithPython(inputs);
  ASSERT_TRUE(verdicts.ok()) << verdicts.status().message();
  ASSERT_EQ(verdicts->size(), 4u);
  EXPECT_TRUE((*verdicts)[0].compiles);
  EXPECT_FALSE((*verdicts)[1].compiles);
  EXPECT_TRUE((*verdicts)[1].original_compiles);
  EXPECT_EQ((*verdicts)[1].line, 2u);
  EXPECT_NE((*verdicts)[1].message.find("__future__"), std::string::npos) << (*verdicts)[1].message;
  EXPECT_FALSE((*verdicts)[2].compiles);
  EXPECT_FALSE((*verdicts)[2].original_compiles);
  EXPECT_TRUE((*verdicts)[3].compiles) << (*verdicts)[3].message;
}

TEST(CompileWithPython, NoPythonIsAnError) {
  auto verdicts = CompileWithPython({{"x = 1\n", "x = 1\n"}}, "/nonexistent/python3");
  EXPECT_FALSE(verdicts.ok());
}

TEST(MigrateRules, TheNpuTargetHasTheReferenceArgumentRewrites) {
  auto rules = target::LoadMigrateRules(kDataDir / "targets" / "npu");
  ASSERT_TRUE(rules.ok()) << rules.status().message();
  EXPECT_EQ(rules->args.size(), 61u);
  EXPECT_EQ(std::count_if(rules->args.begin(), rules->args.end(), [](const auto& r) { return r.always; }), 55);
  auto to = std::find_if(rules->args.begin(), rules->args.end(),
                         [](const auto& r) { return r.api == "to" && r.always && r.position == 0; });
  ASSERT_NE(to, rules->args.end());
  EXPECT_TRUE(to->method);
  EXPECT_NE(to->replacement.find("$arg"), std::string::npos);
  EXPECT_FALSE(rules->keywords.empty());
  EXPECT_FALSE(rules->additions.empty());
  auto combine = std::find_if(rules->additions.begin(), rules->additions.end(),
                              [](const auto& a) { return a.api == "apex.amp.initialize"; });
  ASSERT_NE(combine, rules->additions.end());
  EXPECT_EQ(combine->keyword, "combine_grad");
  EXPECT_EQ(combine->when_keyword, "optimizers");
  EXPECT_EQ(combine->when_position, 1);
  EXPECT_EQ(combine->position, -1);
  // DDP's broadcast_buffers=False: unconditional, left where given positionally (5th parameter).
  auto buffers = std::find_if(rules->additions.begin(), rules->additions.end(),
                              [](const auto& a) { return a.api == "torch.nn.parallel.DistributedDataParallel"; });
  ASSERT_NE(buffers, rules->additions.end());
  EXPECT_EQ(buffers->keyword, "broadcast_buffers");
  EXPECT_EQ(buffers->value, "False");
  EXPECT_TRUE(buffers->when_keyword.empty());
  EXPECT_EQ(buffers->when_position, -1);
  EXPECT_EQ(buffers->position, 4);
  ASSERT_EQ(rules->kept.size(), 1u);
  EXPECT_EQ(rules->kept[0].api, "torch.load");
  // A target without the file has no rules.
  auto cpu = target::LoadMigrateRules(kDataDir / "targets" / "cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_TRUE(cpu->args.empty());
}

TEST_F(Scratch, MigrateRulesErrorsNameTheFileAndTheProblem) {
  auto error = [&](const std::string& text) {
    Write("migrate_rules.json", text);
    auto r = target::LoadMigrateRules(dir_);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(error("{\"argz\": []}").find("unknown key \"argz\""), std::string::npos);
  EXPECT_NE(error("{\"arg_rewrites\": [{\"api\": \"to\", \"new\": \"x\"}]}").find("exactly one of"), std::string::npos);
  EXPECT_NE(error("{\"arg_rewrites\": [{\"api\": \"to\", \"position\": 0, \"new\": \"\", \"skip\": [\"(\"]}]}")
                .find("invalid regular expression"),
            std::string::npos);
  EXPECT_NE(error("{\"keyword_additions\": [{\"api\": \"a\"}]}").find("needs a non-empty"), std::string::npos);
  EXPECT_NE(error("{\"keyword_additions\": [{\"api\": \"a\", \"keyword\": \"k\", \"value\": \"1\", \"when_position\": "
                  "\"1\"}]}")
                .find("\"keyword_additions\"[0].when_position must be a small integer >= 0"),
            std::string::npos);
  EXPECT_NE(error("{\"keyword_additions\": [{\"api\": \"a\", \"keyword\": \"k\", \"value\": \"1\", \"position\": -1}]}")
                .find("\"keyword_additions\"[0].position must be a small integer >= 0"),
            std::string::npos);
  EXPECT_NE(error("{\"keyword_additions\": [{\"api\": \"a\", \"keyword\": \"k\", \"value\": \"1\", \"pos\": 1}]}")
                .find("unknown key \"keyword_additions\"[0].pos (known: api, when_keyword, when_position, keyword, "
                      "position, value)"),
            std::string::npos);
  EXPECT_NE(error("{\"kept_arguments\": [{\"api\": \"torch.load\", \"keyword\": \"map_location\"}]}")
                .find("\"kept_arguments\"[0] needs a non-empty \"api\", \"when\" and \"why\""),
            std::string::npos);
  EXPECT_NE(error("{\"kept_arguments\": [{\"api\": \"f\", \"when\": \"x\", \"why\": \"y\"}]}")
                .find("needs \"keyword\" or \"position\""),
            std::string::npos);
  EXPECT_NE(error("{\"kept_arguments\": [{\"api\": \"f\", \"keyword\": \"k\", \"when\": \"(\", \"why\": \"y\"}]}")
                .find("\"kept_arguments\"[0].when: invalid regular expression '('"),
            std::string::npos);
  EXPECT_NE(error("{\"kept_arguments\": [{\"api\": \"f\", \"keyword\": \"k\", \"when\": \"x\", \"why\": \"y\", "
                  "\"how\": \"z\"}]}")
                .find("unknown key \"kept_arguments\"[0].how"),
            std::string::npos);
  // An addition without a condition, and a kept argument, load.
  Write("migrate_rules.json",
        "{\"keyword_additions\": [{\"api\": \"a.f\", \"keyword\": \"k\", \"value\": \"True\"}], "
        "\"kept_arguments\": [{\"api\": \"a.g\", \"position\": 1, \"when\": \"None\", \"why\": \"y\"}]}");
  auto ok = target::LoadMigrateRules(dir_);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->additions.size(), 1u);
  EXPECT_TRUE(ok->additions[0].when_keyword.empty());
  EXPECT_EQ(ok->additions[0].when_position, -1);
  EXPECT_EQ(ok->additions[0].position, -1);
  ASSERT_EQ(ok->kept.size(), 1u);
  EXPECT_EQ(ok->kept[0].position, 1);
  EXPECT_TRUE(ok->kept[0].keyword.empty());
  EXPECT_NE(error("[").find("migrate_rules.json"), std::string::npos);
}

TEST_F(Scratch, RunMigrateUndoesAFileThatCPythonRejects) {
  Write("proj/a.py", "import torch\n\n\ndef f(x):\n    return x.cuda()\n");
  Write("proj/b.py", "import torch\n\n\ndef g(x):\n    return x.cuda()\n");
  // A stand-in for python3 that says the first file's edits break it.
  Write("fake_python", "#!/bin/sh\nprintf '0\\tbroken\\t5\\tinvalid syntax\\n'\n");
  ::chmod((dir_ / "fake_python").c_str(), 0755);
  Logger logger{nullptr, SystemClock()};
  Context ctx{logger, SystemClock(), kDataDir, 1, true};
  MigrateOptions opt;
  opt.input = dir_ / "proj";
  opt.output = dir_ / "out";
  opt.python = (dir_ / "fake_python").string();
  auto report = RunMigrate(opt, ctx);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->files_changed, 1u);
  auto it = std::find_if(report->warnings.begin(), report->warnings.end(),
                         [](const FileProblem& p) { return p.kind == "not_migrated"; });
  ASSERT_NE(it, report->warnings.end());
  EXPECT_EQ(it->file, "proj/a.py");
  EXPECT_NE(it->message.find("does not compile with python3: invalid syntax (line 5)"), std::string::npos);
  auto a = ReadFile(report->results_dir / "a.py");
  auto b = ReadFile(report->results_dir / "b.py");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->find("x.cuda()"), std::string::npos);
  EXPECT_NE(b->find("x.npu()"), std::string::npos);
}

TEST_F(Scratch, RunMigrateWithoutPythonWarnsAndKeepsTheTreeSitterCheck) {
  Write("proj/a.py", "import torch\n\n\ndef f(x):\n    return x.cuda()\n");
  Logger logger{nullptr, SystemClock()};
  Context ctx{logger, SystemClock(), kDataDir, 1, true};
  MigrateOptions opt;
  opt.input = dir_ / "proj";
  opt.output = dir_ / "out";
  opt.python = "/nonexistent/python3";
  auto report = RunMigrate(opt, ctx);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->files_changed, 1u);
  EXPECT_NE(logger.Contents().find("were not compiled with CPython"), std::string::npos);
}

// --unsafe: the fused masked index_put returns a new tensor, so `x[m] = v` becomes
// `x = fused(x, m, v)` only where nothing can see the old object changed in place.
TEST_F(Scratch, UnsafeIndexPutRewritesOnlyUnsharedLocals) {
  Write("proj/m.py",
        "import torch\n"
        "\n"
        "\n"
        "def fresh(y: torch.Tensor):\n"
        "    x = y.clone()\n"
        "    x[x < 0] = 0.0\n"
        "    return x\n"
        "\n"
        "\n"
        "def parameter(x: torch.Tensor):\n"
        "    x[x < 0] = 0.0\n"
        "\n"
        "\n"
        "def aliased(y: torch.Tensor):\n"
        "    x = y * 2\n"
        "    z = x\n"
        "    x[x < 0] = 0.0\n"
        "    return z\n"
        "\n"
        "\n"
        "def view_of_it(y: torch.Tensor):\n"
        "    x = y + 1\n"
        "    row = x[0]\n"
        "    x[x < 0] = 0.0\n"
        "    return row\n"
        "\n"
        "\n"
        "def stored_in_loop(y: torch.Tensor):\n"
        "    out = []\n"
        "    x = torch.zeros(3)\n"
        "    for _ in range(3):\n"
        "        x[x < 0] = 1.0\n"
        "        out.append(x)\n"
        "    return out\n"
        "\n"
        "\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, y: torch.Tensor):\n"
        "        self.buf = torch.zeros(3)\n"
        "        self.buf[self.buf < 0] = 0.0\n"
        "        return y\n");
  Logger logger{nullptr, SystemClock()};
  Context ctx{logger, SystemClock(), kDataDir, 1, true};
  MigrateOptions opt;
  opt.input = dir_ / "proj";
  opt.output = dir_ / "out";
  opt.unsafe = true;
  auto report = RunMigrate(opt, ctx);
  ASSERT_TRUE(report.ok()) << report.status().message();
  auto m = ReadFile(report->results_dir / "m.py");
  ASSERT_TRUE(m.ok());
  const std::string fused = "torch_npu.contrib.function.npu_fast_condition_index_put";
  EXPECT_NE(m->find("    x = " + fused + "(x, x < 0, 0.0)\n    return x\n"), std::string::npos) << *m;
  EXPECT_NE(m->find("import torch_npu.contrib.function\n"), std::string::npos) << *m;
  size_t rewrites = 0;
  for (size_t at = m->find(fused + "("); at != std::string::npos; at = m->find(fused + "(", at + 1)) ++rewrites;
  EXPECT_EQ(rewrites, 1u) << *m;
  std::vector<uint32_t> left;
  for (const auto& w : report->warnings)
    if (w.kind == "affinity_not_applied") left.push_back(w.line);
  EXPECT_EQ(left, (std::vector<uint32_t>{11, 17, 24, 32, 40})) << *m;  // 40: an attribute, not a local
}

}  // namespace
}  // namespace portkit::analyse
