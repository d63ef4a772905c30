#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

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
  EXPECT_EQ(CsvWriter::EscapeCell("+1+cmd"), "'+1+cmd");
  EXPECT_EQ(CsvWriter::EscapeCell("-1+2"), "'-1+2");
  EXPECT_EQ(CsvWriter::EscapeCell("-x"), "'-x");
  // Plain numbers are not formulas and keep their sign.
  EXPECT_EQ(CsvWriter::EscapeCell("-0.25"), "-0.25");
  EXPECT_EQ(CsvWriter::EscapeCell("+1e-5"), "+1e-5");
  EXPECT_EQ(CsvWriter::EscapeCell("-inf"), "-inf");
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
  j.BeginObject()
      .Key("a")
      .Int(1)
      .Key("s")
      .String("q\"\n")
      .Key("l")
      .BeginArray()
      .Bool(true)
      .Null()
      .EndArray()
      .EndObject();
  EXPECT_EQ(j.str(), "{\n  \"a\": 1,\n  \"s\": \"q\\\"\\n\",\n  \"l\": [\n    true,\n    null\n  ]\n}\n");
}

TEST(JsonWriter, BytesOutsideUtf8AreSurrogateEscaped) {
  auto escaped = [](std::string_view s) {
    std::string out;
    JsonWriter::AppendEscaped(out, s);
    return out;
  };
  // Well-formed UTF-8 (2, 3 and 4 bytes) passes unchanged.
  EXPECT_EQ(escaped("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  // Latin-1, a stray continuation byte, a cut sequence, an overlong form, an encoded surrogate and
  // a code point past U+10FFFF: each byte that is not part of well-formed UTF-8 is \udcXX.
  EXPECT_EQ(escaped("caf\xe9.py"), "\"caf\\udce9.py\"");
  EXPECT_EQ(escaped("\x80"
                    "a"),
            "\"\\udc80a\"");
  EXPECT_EQ(escaped("a\xe2\x82"), "\"a\\udce2\\udc82\"");
  EXPECT_EQ(escaped("\xc0\xaf"), "\"\\udcc0\\udcaf\"");
  EXPECT_EQ(escaped("\xed\xa0\x80"), "\"\\udced\\udca0\\udc80\"");
  EXPECT_EQ(escaped("\xf4\x90\x80\x80"), "\"\\udcf4\\udc90\\udc80\\udc80\"");
  // After an escaped byte, a valid sequence and control characters are handled as usual.
  EXPECT_EQ(escaped("\xff\xc3\xa9\n"), "\"\\udcff\xc3\xa9\\n\"");
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

// A report set: nothing under the final names and no marker until Publish; then the files and
// the marker (written last) listing them; unpublished, no temporary is left.
TEST(ReportSet, PublishesFilesThenTheMarker) {
  auto dir = std::filesystem::temp_directory_path() / ("portkit_report_set_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    ReportSet set(dir, ".set.complete");
    ASSERT_TRUE(set.Add("a.csv", "1,2\n").ok());
    ASSERT_TRUE(set.Add("b.json", "{}").ok());
    EXPECT_FALSE(std::filesystem::exists(dir / "a.csv"));
    EXPECT_FALSE(std::filesystem::exists(dir / ".set.complete"));
    ASSERT_TRUE(set.Publish().ok());
  }
  auto marker = ReadFile(dir / ".set.complete");
  ASSERT_TRUE(marker.ok());
  EXPECT_EQ(*marker, "a.csv 4\nb.json 2\n");
  EXPECT_EQ(*ReadFile(dir / "a.csv"), "1,2\n");
  {
    ReportSet unpublished(dir, ".set.complete");
    ASSERT_TRUE(unpublished.Add("c.csv", "x").ok());
  }
  size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 3u);  // a.csv, b.json, the marker: the unpublished temporary is gone
  std::filesystem::remove_all(dir);
}

// A streamed file is the concatenation of its pieces and counted in the marker; a failing
// producer's error comes back and leaves no temporary, and the writer's Take() keeps its state.
TEST(ReportSet, StreamedFilesArePiecesInOrderAndFailuresLeaveNothing) {
  auto dir = std::filesystem::temp_directory_path() / ("portkit_report_stream_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  JsonWriter j;
  std::string pieces;
  {
    ReportSet set(dir, ".set.complete");
    ASSERT_TRUE(set.AddStreamed("s.json",
                                [&](const ReportSet::Sink& sink) -> Status {
                                  j.BeginObject().Key("a").Int(1);
                                  pieces += j.str();
                                  PORTKIT_RETURN_IF_ERROR(sink(j.Take()));
                                  EXPECT_EQ(j.size(), 0u);
                                  j.Key("b").BeginArray().Int(2).Int(3).EndArray().EndObject();
                                  pieces += j.str();
                                  return sink(j.Take());
                                })
                    .ok());
    ASSERT_TRUE(set.Publish().ok());
  }
  JsonWriter whole;
  whole.BeginObject().Key("a").Int(1).Key("b").BeginArray().Int(2).Int(3).EndArray().EndObject();
  EXPECT_EQ(pieces, whole.str());
  EXPECT_EQ(*ReadFile(dir / "s.json"), whole.str());
  EXPECT_EQ(*ReadFile(dir / ".set.complete"), "s.json " + std::to_string(whole.str().size()) + "\n");
  {
    ReportSet set(dir, ".other.complete");
    Status failed = set.AddStreamed("bad.csv", [](const ReportSet::Sink& sink) -> Status {
      PORTKIT_RETURN_IF_ERROR(sink("x,y\n"));
      return IoError("renderer gave up");
    });
    EXPECT_FALSE(failed.ok());
    EXPECT_NE(failed.message().find("renderer gave up"), std::string::npos);
  }
  for (auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find("bad.csv"), std::string::npos) << e.path();
  std::filesystem::remove_all(dir);
}

// Temporaries of a process that no longer exists go; those of a live one (this process) stay.
TEST(ReportSet, RemovesOnlyStaleTemporaries) {
  auto dir = std::filesystem::temp_directory_path() / ("portkit_stale_tmp_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // a pid that is surely gone now
  const std::string dead = "r.csv.tmp." + std::to_string(child), live = "r.csv.tmp." + std::to_string(::getpid());
  ASSERT_TRUE(WriteFileAtomic(dir / dead, "x").ok());
  ASSERT_TRUE(WriteFileAtomic(dir / live, "x").ok());
  ASSERT_TRUE(WriteFileAtomic(dir / "keep.tmp.txt", "x").ok());
  EXPECT_EQ(RemoveStaleTemporaries(dir), std::vector<std::string>{dead});
  EXPECT_TRUE(std::filesystem::exists(dir / live));
  EXPECT_TRUE(std::filesystem::exists(dir / "keep.tmp.txt"));
  std::filesystem::remove_all(dir);
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

#include "core/csv_reader.h"
#include "core/unified_diff.h"

namespace portkit {
namespace {

TEST(UnifiedDiff, HunksWithContext) {
  std::string a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";
  std::string b = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n11\n";
  EXPECT_EQ(UnifiedDiff(a, b, "x.py"),
            "--- a/x.py\n+++ b/x.py\n"
            "@@ -2,9 +2,10 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n 9\n 10\n+11\n");
  EXPECT_EQ(UnifiedDiff(a, a, "x.py"), "");
  EXPECT_EQ(UnifiedDiff("", "new\n", "n.py"), "--- a/n.py\n+++ b/n.py\n@@ -0,0 +1,1 @@\n+new\n");
}

TEST(CsvReader, QuotesNewlinesAndErrors) {
  auto rows = ParseCsv("a,b\n\"x,1\",\"l1\nl2\"\n\"q\"\"\",\n", "t.csv");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[1][0], "x,1");
  EXPECT_EQ((*rows)[1][1], "l1\nl2");
  EXPECT_EQ((*rows)[2][0], "q\"");
  EXPECT_EQ((*rows)[2][1], "");
  auto bad = ParseCsv("a\n\"open\n", "t.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "t.csv:2: unterminated quoted field");
  auto stray = ParseCsv("a\"b\n", "t.csv");
  ASSERT_FALSE(stray.ok());
  EXPECT_EQ(stray.status().message(), "t.csv:1: unexpected quote inside a field");
}

// The streaming parser gives the whole-text result wherever the input is cut: a doubled quote,
// a closing quote or a CRLF split between two pieces is still read as one.
TEST(CsvReader, StreamedInPiecesAgreesWithWholeParse) {
  const std::string text = "Name,\"Start Time(us)\"\r\n\"a\"\"b\",1.5\r\n\"l1\nl2\",\"\"\r\nlast,2";
  auto whole = ParseCsv(text, "k.csv");
  ASSERT_TRUE(whole.ok());
  ASSERT_EQ(whole->size(), 4u);
  EXPECT_EQ((*whole)[1][0], "a\"b");
  EXPECT_EQ((*whole)[2][0], "l1\nl2");
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    for (size_t cut2 = cut; cut2 <= text.size(); ++cut2) {
      CsvRows rows;
      CsvStreamParser parser("k.csv");
      auto keep = [&](std::vector<std::string>& r) {
        rows.push_back(std::move(r));
        return Status::Ok();
      };
      ASSERT_TRUE(parser.Feed(std::string_view(text).substr(0, cut), keep).ok());
      ASSERT_TRUE(parser.Feed(std::string_view(text).substr(cut, cut2 - cut), keep).ok());
      ASSERT_TRUE(parser.Feed(std::string_view(text).substr(cut2), keep).ok());
      ASSERT_TRUE(parser.Finish(keep).ok());
      EXPECT_EQ(rows, *whole) << "cut at " << cut << " and " << cut2;
    }
  }
}

// An unterminated quote in a huge file must not grow one field without end.
TEST(CsvReader, StreamedRecordCap) {
  CsvStreamParser parser("big.csv", 1u << 20);
  size_t records = 0;
  auto count = [&](std::vector<std::string>&) {
    ++records;
    return Status::Ok();
  };
  ASSERT_TRUE(parser.Feed("Name,x\n\"open,", count).ok());
  std::string chunk(64 << 10, 'x');
  Status st = Status::Ok();
  for (int i = 0; i < 32 && st.ok(); ++i) st = parser.Feed(chunk, count);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "big.csv:2: a record longer than 1 MiB (an unterminated quote?); not read further");
  EXPECT_EQ(records, 1u);
}

}  // namespace
}  // namespace portkit
