#pragma once
// Shared by the replay-based tests: the recorded landscape of tests/data/tune/small_model.json
// (exhaustive over a pinned space, measured on a 2-core machine).
#include <gtest/gtest.h>

#include <string>

#include "core/atomic_file.h"
#include "tune/landscape.h"

namespace portkit::tune {

inline Landscape LoadFixtureLandscape() {
  std::string path = std::string(PORTKIT_TUNE_TEST_DATA) + "/landscape_small.jsonl";
  auto text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status().message();
  auto l = ParseLandscape(text.ok() ? *text : "", path);
  EXPECT_TRUE(l.ok()) << l.status().message();
  return l.ok() ? *l : Landscape{};
}

}  // namespace portkit::tune
