// Bank semantics of a session, on the recorded landscape (replay): add, hit, reserved, update,
// unsatisfied; and the result file's schema.
#include "tune/session.h"

#include <gtest/gtest.h>
#include <simdjson.h>
#include <unistd.h>

#include "render/tune_render.h"
#include "replay_test_util.h"
#include "tune/operators/gemm/gemm_space.h"
#include "tune/report.h"

namespace portkit::tune {
namespace {
namespace fs = std::filesystem;

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("portkit_session_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    landscape_ = LoadFixtureLandscape();
    list_.name = "fixture";
    list_.ops = landscape_.ops;
    options_.strategy = "random";
    options_.budget.max_evals = 12;
  }
  void TearDown() override { fs::remove_all(dir_); }

  SessionResult Run(KnowledgeBase& kb, const Landscape& l) {
    Logger logger(nullptr, SystemClock());
    auto r = RunSession(list_, options_, kb, &l, nullptr, logger);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : SessionResult{};
  }
  static std::vector<std::string> Statuses(const SessionResult& r) {
    std::vector<std::string> out;
    for (const auto& op : r.ops) out.push_back(RepoStatusName(op.status));
    return out;
  }

  fs::path dir_;
  Landscape landscape_;
  OpList list_;
  SessionOptions options_;
};

TEST_F(SessionTest, AddThenHitThenReserved) {
  auto kb = KnowledgeBase::Open(dir_);
  ASSERT_TRUE(kb.ok());
  // A complete first search stores each operator's optimum.
  options_.strategy = "exhaustive";
  options_.budget.max_evals = 1000;
  SessionResult first = Run(*kb, landscape_);
  EXPECT_EQ(Statuses(first), (std::vector<std::string>{"add", "add"}));
  for (const auto& op : first.ops) {
    EXPECT_LT(op.after_us, op.before_us);
    EXPECT_EQ(op.source, "tuned");
  }
  options_.strategy = "random";
  options_.budget.max_evals = 12;
  auto entries = kb->List();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 2u);

  SessionResult second = Run(*kb, landscape_);
  EXPECT_EQ(Statuses(second), (std::vector<std::string>{"hit", "hit"}));
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(second.ops[i].config, first.ops[i].config);
    EXPECT_EQ(second.ops[i].after_us, first.ops[i].after_us);
    EXPECT_EQ(second.ops[i].evaluations, 0);
  }

  // Re-tuning cannot beat the stored optimum: the entries are kept.
  options_.repeat_tune = true;
  SessionResult third = Run(*kb, landscape_);
  EXPECT_EQ(Statuses(third), (std::vector<std::string>{"reserved", "reserved"}));
  auto after = kb->List();
  ASSERT_TRUE(after.ok());
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ((*after)[i].config, (*entries)[i].config);
}

TEST_F(SessionTest, RepeatTuneReplacesAWorseEntry) {
  auto kb = KnowledgeBase::Open(dir_);
  ASSERT_TRUE(kb.ok());
  options_.budget.max_evals = 2;  // a short first search leaves room for a better one
  SessionResult first = Run(*kb, landscape_);
  options_.repeat_tune = true;
  options_.budget.max_evals = 400;
  options_.strategy = "exhaustive";
  SessionResult second = Run(*kb, landscape_);
  int added = 0;
  for (size_t i = 0; i < 2; ++i) {
    if (first.ops[i].status != RepoStatus::kAdd) continue;
    ++added;
    EXPECT_EQ(RepoStatusName(second.ops[i].status), std::string("update"));
    EXPECT_LT(second.ops[i].after_us, first.ops[i].after_us);
  }
  EXPECT_GT(added, 0) << "the first session added nothing: the test would pass vacuously";
  auto entries = kb->List();
  ASSERT_TRUE(entries.ok());
  for (const auto& e : *entries) {
    double best = kRejected;
    for (const auto& [k, p] : landscape_.points.at(e.op_key))
      if (p.status == "ok") best = std::min(best, p.time_us);
    EXPECT_EQ(e.time_us, best) << e.op_key;
  }
}

TEST_F(SessionTest, UnsatisfiedWhenNothingBeatsTheDefault) {
  // The same landscape with every configuration but the default made slower than the default.
  Landscape slow = landscape_;
  SearchSpace space = GemmSpace(2);
  for (const auto& f : slow.fixes) ASSERT_TRUE(ApplyFix(space, f).ok());
  std::string default_key = space.Key(GemmDefault(space, 2));
  for (auto& [sig, points] : slow.points) {
    double d = points.at(default_key).time_us;
    for (auto& [key, p] : points)
      if (key != default_key && p.status == "ok") p.time_us = d * 2 + p.time_us;
  }
  auto kb = KnowledgeBase::Open(dir_);
  ASSERT_TRUE(kb.ok());
  SessionResult r = Run(*kb, slow);
  EXPECT_EQ(Statuses(r), (std::vector<std::string>{"unsatisfied", "unsatisfied"}));
  for (const auto& op : r.ops) {
    EXPECT_EQ(op.after_us, op.before_us);
    EXPECT_EQ(op.config, default_key);
  }
  auto entries = kb->List();
  ASSERT_TRUE(entries.ok());
  EXPECT_TRUE(entries->empty());  // unsatisfied operators are not stored
}

TEST_F(SessionTest, ResultFileHasTheAoeFields) {
  auto kb = KnowledgeBase::Open(dir_);
  ASSERT_TRUE(kb.ok());
  OpDesc relu;
  relu.name = "act";
  relu.type = "Relu";
  list_.untuned.push_back({relu, "operator type Relu has no tunable kernel"});
  SessionResult r = Run(*kb, landscape_);
  std::string json = render::TuneResultJson(r);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(simdjson::padded_string(json)).get(root), simdjson::SUCCESS) << json;
  std::string_view name;
  EXPECT_FALSE(root["basic"]["tuning_name"].get_string().get(name));
  EXPECT_EQ(name, "fixture");
  double t;
  EXPECT_FALSE(root["basic"]["tuning_time(s)"].get_double().get(t));
  auto opat = root["OPAT"];
  double base = 0, result = 0;
  ASSERT_FALSE(opat["model_baseline_performance(ms)"].get_double().get(base));
  ASSERT_FALSE(opat["model_result_performance(ms)"].get_double().get(result));
  // Model time = sum of count x operator time.
  double want_base = 0, want_result = 0;
  for (const auto& op : r.ops) {
    want_base += op.op.count * op.before_us / 1000;
    want_result += op.op.count * op.after_us / 1000;
  }
  EXPECT_NEAR(base, want_base, 1e-6);
  EXPECT_NEAR(result, want_result, 1e-6);
  std::string_view improvement, outcome;
  ASSERT_FALSE(opat["model_performance_improvement"].get_string().get(improvement));
  EXPECT_EQ(improvement, Percent((want_base - want_result) / want_base * 100));
  ASSERT_FALSE(opat["opat_tuning_result"].get_string().get(outcome));
  EXPECT_EQ(outcome, "tuning successful");
  simdjson::dom::array added;
  ASSERT_FALSE(opat["repo_modified_operators"]["add_repo_operators"].get_array().get(added));
  EXPECT_EQ(added.size(), 2u);
  for (auto op : added)
    for (const char* field :
         {"op_name", "op_type", "performance_before_tune(us)", "performance_after_tune(us)", "performance_improvement"})
      EXPECT_FALSE(op[field].error()) << field;
  int64_t n;
  auto summary = opat["repo_summary"];
  for (auto [field, want] : {std::pair<const char*, int64_t>{"repo_add_num", 2},
                             {"repo_hit_num", 0},
                             {"repo_reserved_num", 0},
                             {"repo_unsatisfied_num", 0},
                             {"repo_update_num", 0},
                             {"total_num", 2}}) {
    ASSERT_FALSE(summary[field].get_int64().get(n)) << field;
    EXPECT_EQ(n, want) << field;
  }
  simdjson::dom::array untuned;
  ASSERT_FALSE(opat["untuned_operators"].get_array().get(untuned));
  EXPECT_EQ(untuned.size(), 1u);
  EXPECT_NE(render::TunedPlanJson(r).find("\"source\": \"tuned\""), std::string::npos);
}

}  // namespace
}  // namespace portkit::tune

namespace portkit::tune {
namespace {

class SessionInputTest : public SessionTest {};

TEST_F(SessionInputTest, AFixSetWithoutAValidConfigurationIsRejected) {
  auto kb = KnowledgeBase::Open(dir_);
  ASSERT_TRUE(kb.ok());
  options_.fixes = {"VW=8", "NR=48", "MR=12"};
  Logger logger(nullptr, SystemClock());
  auto r = RunSession(list_, options_, *kb, &landscape_, nullptr, logger);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no configuration of"), std::string::npos) << r.status().message();
  auto entries = kb->List();
  ASSERT_TRUE(entries.ok());
  EXPECT_TRUE(entries->empty());
}

TEST_F(SessionInputTest, ALandscapeFixWithAnUnknownKnobNamesTheFile) {
  auto kb = KnowledgeBase::Open(dir_);
  ASSERT_TRUE(kb.ok());
  Landscape l = landscape_;
  l.file = "rec.jsonl";
  l.fixes = {"BOGUS=1"};
  Logger logger(nullptr, SystemClock());
  auto r = RunSession(list_, options_, *kb, &l, nullptr, logger);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("rec.jsonl: fix: --fix BOGUS: unknown knob", 0), 0u) << r.status().message();
}

}  // namespace
}  // namespace portkit::tune
