// Numbers from a trace are range-checked where they are read (docs/safety.md, "Numbers from input").
#include <gtest/gtest.h>

#include "prof/importers/chrome_trace.h"

namespace portkit::prof {
namespace {

TEST(TraceNumbers, HugeIntegersAreOutOfRangeNotWrapped) {
  int64_t ns = 42;
  bool out_of_range = false;
  EXPECT_FALSE(ParseMicrosToNanos("99999999999999999999999", &ns, &out_of_range));
  EXPECT_TRUE(out_of_range);
  EXPECT_EQ(ns, 42);  // untouched
  out_of_range = false;
  EXPECT_FALSE(ParseMicrosToNanos("-99999999999999999999999.5", &ns, &out_of_range));
  EXPECT_TRUE(out_of_range);
  // Just above the bound (4e18 ns = 4e15 us) and just inside it.
  out_of_range = false;
  EXPECT_FALSE(ParseMicrosToNanos("4000000000000001", &ns, &out_of_range));
  EXPECT_TRUE(out_of_range);
  out_of_range = false;
  EXPECT_TRUE(ParseMicrosToNanos("4000000000000000", &ns, &out_of_range));
  EXPECT_FALSE(out_of_range);
  EXPECT_EQ(ns, kMaxTimestampNs);
}

TEST(TraceNumbers, HugeDoublesAreOutOfRange) {
  int64_t ns = 0;
  bool out_of_range = false;
  EXPECT_FALSE(ParseMicrosToNanos("1e300", &ns, &out_of_range));
  EXPECT_TRUE(out_of_range);
  out_of_range = false;
  EXPECT_FALSE(ParseMicrosToNanos("-1e300", &ns, &out_of_range));
  EXPECT_TRUE(out_of_range);
  out_of_range = false;
  EXPECT_FALSE(ParseMicrosToNanos("1e999", &ns, &out_of_range));  // inf
  EXPECT_TRUE(out_of_range);
  out_of_range = false;
  EXPECT_FALSE(ParseMicrosToNanos("nan", &ns, &out_of_range));  // not a number at all
  EXPECT_FALSE(out_of_range);
}

TEST(TraceNumbers, DurationBounds) {
  EXPECT_TRUE(TimesInRange(0, 0));
  EXPECT_TRUE(TimesInRange(kMaxTimestampNs, kMaxDurationNs));
  EXPECT_FALSE(TimesInRange(0, -1));  // a negative duration would give negative profiled time
  EXPECT_FALSE(TimesInRange(0, kMaxDurationNs + 1));
  EXPECT_FALSE(TimesInRange(kMaxTimestampNs + 1, 0));
  EXPECT_FALSE(TimesInRange(-kMaxTimestampNs - 1, 0));
  // Every sum the exporters make of in-range values stays in int64.
  EXPECT_LT(kMaxTimestampNs + kMaxDurationNs, INT64_MAX / 2);
}

}  // namespace
}  // namespace portkit::prof
