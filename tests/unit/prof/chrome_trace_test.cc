#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "prof/importers/chrome_trace.h"
#include "prof/json_stream.h"

namespace portkit::prof {
namespace {

TEST(ChromeTrace, MicrosecondsToExactNanoseconds) {
  int64_t ns = 0;
  ASSERT_TRUE(ParseMicrosToNanos("1679055451547906", &ns));
  EXPECT_EQ(ns, 1679055451547906000);
  ASSERT_TRUE(ParseMicrosToNanos("\"1704161511420306.491\"", &ns));  // torch_npu writes strings
  EXPECT_EQ(ns, 1704161511420306491);
  ASSERT_TRUE(ParseMicrosToNanos("1212075525586.016\n  ", &ns));  // a raw token with the spaces after it
  EXPECT_EQ(ns, 1212075525586016);
  ASSERT_TRUE(ParseMicrosToNanos("13.08", &ns));
  EXPECT_EQ(ns, 13080);
  ASSERT_TRUE(ParseMicrosToNanos("0.0004", &ns));
  EXPECT_EQ(ns, 0);
  ASSERT_TRUE(ParseMicrosToNanos("-1", &ns));
  EXPECT_EQ(ns, -1000);
  ASSERT_TRUE(ParseMicrosToNanos("1.5e3", &ns));
  EXPECT_EQ(ns, 1500000);
  EXPECT_FALSE(ParseMicrosToNanos("abc", &ns));
  EXPECT_FALSE(ParseMicrosToNanos("", &ns));
}

std::string Write(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

TEST(JsonStream, SplitsEventsAndMembersInAnyOrder) {
  std::string path =
      Write("portkit_stream.json",
            "{\"schemaVersion\": 1, \"traceEvents\": [{\"name\": \"a}\\\"]\", \"ph\": \"X\"},"
            " {\"name\": \"b\", \"args\": {\"x\": [1, {\"y\": 2}]}}], \"deviceProperties\": [{\"id\": 0}]}");
  std::vector<std::string> events, keys;
  StreamStats stats;
  Status st = SplitTraceEvents(
      path,
      {[&](std::string_view e) { events.emplace_back(e); },
       [&](std::string_view k, std::string_view v) { keys.push_back(std::string(k) + "=" + std::string(v)); }},
      &stats);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], "{\"name\": \"a}\\\"]\", \"ph\": \"X\"}");
  EXPECT_EQ(keys, (std::vector<std::string>{"schemaVersion=1", "deviceProperties=[{\"id\": 0}]"}));
  EXPECT_FALSE(stats.truncated);
  std::filesystem::remove(path);
}

TEST(JsonStream, TruncatedInputKeepsCompleteEventsAndSaysWhere) {
  std::string path = Write("portkit_cut.json", "{\"traceEvents\": [{\"a\": 1}, {\"b\": \"unfinished");
  size_t n = 0;
  StreamStats stats;
  Status st = SplitTraceEvents(path, {[&](std::string_view) { ++n; }, nullptr}, &stats);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(n, 1u);
  EXPECT_TRUE(stats.truncated);
  EXPECT_EQ(stats.stop_reason, "input ends inside the document at byte 44");
  std::filesystem::remove(path);
}

TEST(JsonStream, NotATraceIsAnError) {
  std::string path = Write("portkit_not.json", "hello");
  StreamStats stats;
  Status st = SplitTraceEvents(path, {}, &stats);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), path + ":1:1: not a JSON trace (expected '{' or '[')");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace portkit::prof
