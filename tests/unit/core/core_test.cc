#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/csv_writer.h"
#include "core/json_writer.h"
#include "core/log.h"
#include "core/table.h"
#include "core/thread_pool.h"

namespace portkit {
namespace {

TEST(CsvWriter, NeutralisesFormulaCells) {
  EXPECT_EQ(CsvWriter::EscapeCell("=SUM(A1)"), "'=SUM(A1)");
  EXPECT_EQ(CsvWriter::EscapeCell("+1"), "'+1");
  EXPECT_EQ(CsvWriter::EscapeCell("-1"), "'-1");
  EXPECT_EQ(CsvWriter::EscapeCell("@x"), "'@x");
  EXPECT_EQ(CsvWriter::EscapeCell("%y"), "'%y");
  EXPECT_EQ(CsvWriter::EscapeCell("torch.cdist"), "torch.cdist");
}

TEST(CsvWriter, QuotesCommasQuotesAndNewlines) {
  EXPECT_EQ(CsvWriter::EscapeCell("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvWriter::EscapeCell("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvWriter::EscapeCell("l1\nl2"), "\"l1\nl2\"");
  EXPECT_EQ(CsvWriter::EscapeCell("=a,b"), "\"'=a,b\"");
}

TEST(CsvWriter, WritesHeaderAndRows) {
  CsvWriter w({"File", "Api"});
  w.AddRow({"a.py", "torch.cuda.synchronize"});
  EXPECT_EQ(w.str(), "File,Api\na.py,torch.cuda.synchronize\n");
  EXPECT_EQ(w.rows(), 1u);
}

TEST(JsonWriter, NestedAndEscaped) {
  JsonWriter j;
  j.BeginObject().Key("a").Int(1).Key("s").String("q\"\n").Key("l").BeginArray().Bool(true).Null().EndArray().EndObject();
  EXPECT_EQ(j.str(), "{\n  \"a\": 1,\n  \"s\": \"q\\\"\\n\",\n  \"l\": [\n    true,\n    null\n  ]\n}\n");
}

TEST(AtomicFile, WritesAndReplaces) {
  auto dir = std::filesystem::temp_directory_path() / "portkit_atomic_test";
  std::filesystem::create_directories(dir);
  auto path = dir / "out.txt";
  ASSERT_TRUE(WriteFileAtomic(path, "one").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "two").ok());
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "two");
  // No temporary file is left behind.
  size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
  std::filesystem::remove_all(dir);
}

TEST(AtomicFile, MissingFolderIsAnErrorNamingThePath) {
  Status st = WriteFileAtomic("/nonexistent-dir-portkit/x.csv", "x");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind("/nonexistent-dir-portkit/x.csv: cannot write:", 0), 0u) << st.message();
}

TEST(Logger, SeedFormat) {
  std::tm tm{};
  tm.tm_year = 123, tm.tm_mon = 5, tm.tm_mday = 27, tm.tm_hour = 16, tm.tm_min = 48, tm.tm_sec = 34;
  tm.tm_isdst = -1;
  auto t = std::chrono::system_clock::from_time_t(std::mktime(&tm));
  Logger log(nullptr, [t] { return t; });
  log.Info("Analysis start...");
  log.Warning("careful");
  EXPECT_EQ(log.Contents(),
            "2023-06-27 16:48:34 [INFO]    Analysis start...\n"
            "2023-06-27 16:48:34 [WARNING] careful\n");
  EXPECT_EQ(log.warnings(), 1u);
}

TEST(Progress, PercentLikeTheSeed) {
  EXPECT_EQ(Progress::Percent(0, 10), "[Progress:  0.00%]  ");
  EXPECT_EQ(Progress::Percent(1, 1500), "[Progress:  0.07%]  ");
  EXPECT_EQ(Progress::Percent(5, 5), "[Progress:100.00%]  ");
}

TEST(Table, SeedLayout) {
  EXPECT_EQ(RenderTable({"files", "statistics"}, {{"affinity_api_call.csv", "57"}}),
            "+-----------------------+------------+\n"
            "|         files         | statistics |\n"
            "+-----------------------+------------+\n"
            "| affinity_api_call.csv |     57     |\n"
            "+-----------------------+------------+\n");
}

TEST(ThreadPool, ParallelForVisitsEveryIndexOnce) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(1000);
  pool.ParallelFor(hits.size(), [&](int worker, size_t i) {
    EXPECT_LT(worker, 2);
    hits[i]++;
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

}  // namespace
}  // namespace portkit
