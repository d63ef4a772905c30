#include "core/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace portkit {
namespace {

TEST(Spawn, CapturesOutputAndExitCode) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"};
  auto r = Spawn(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->end, ProcessResult::End::kExited);
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->output, "out\n");
  EXPECT_EQ(r->error_output, "err\n");
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->Describe(), "exited with status 3");
}

TEST(Spawn, MergesStderrAndPassesEnvironment) {
  setenv("PORTKIT_SPAWN_TEST_DROP", "x", 1);
  SpawnOptions o;
  o.argv = {"sh", "-c", "echo $PORTKIT_A; echo ${PORTKIT_SPAWN_TEST_DROP:-gone} >&2"};
  o.env_set = {"PORTKIT_A=hello"};
  o.env_unset = {"PORTKIT_SPAWN_TEST_DROP"};
  o.merge_stderr = true;
  auto r = Spawn(o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ok());
  EXPECT_EQ(r->output, "hello\ngone\n");
  unsetenv("PORTKIT_SPAWN_TEST_DROP");
}

TEST(Spawn, RunsInTheGivenFolder) {
  SpawnOptions o;
  o.argv = {"pwd"};
  o.cwd = "/tmp";
  auto r = Spawn(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output, "/tmp\n");
}

TEST(Spawn, TimeoutKillsTheWholeProcessGroup) {
  char tmpl[] = "/tmp/portkit_spawn_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string pidfile = std::string(tmpl) + "/grandchild";
  SpawnOptions o;
  // The grandchild would outlive a kill of the shell alone.
  o.argv = {"sh", "-c", "sleep 30 & echo $! > " + pidfile + "; wait"};
  o.timeout_seconds = 0.5;
  auto r = Spawn(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->end, ProcessResult::End::kTimedOut);
  EXPECT_LT(r->seconds, 10);
  EXPECT_EQ(r->Describe(), "timed out after 0.5 s (killed)");
  FILE* f = fopen(pidfile.c_str(), "r");
  ASSERT_NE(f, nullptr);
  int pid = 0;
  ASSERT_EQ(fscanf(f, "%d", &pid), 1);
  fclose(f);
  usleep(100000);
  // Reaped by init or a zombie at most: signal 0 fails or the process is gone from /proc stat.
  std::string stat = "/proc/" + std::to_string(pid) + "/stat";
  FILE* s = fopen(stat.c_str(), "r");
  if (s) {
    char state = 0;
    int ignored = 0;
    char comm[256];
    ASSERT_EQ(fscanf(s, "%d %255s %c", &ignored, comm, &state), 3);
    fclose(s);
    EXPECT_EQ(state, 'Z') << "the grandchild still runs";
  }
  std::system(("rm -rf " + std::string(tmpl)).c_str());
}

TEST(Spawn, MissingProgramIsAnError) {
  SpawnOptions o;
  o.argv = {"/nonexistent/portkit-no-such-program"};
  auto r = Spawn(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.status().message().find("cannot run /nonexistent/portkit-no-such-program"), std::string::npos);
}

TEST(Spawn, CaptureIsBounded) {
  SpawnOptions o;
  o.argv = {"sh", "-c", "head -c 100000 /dev/zero"};
  o.max_capture_bytes = 1000;
  auto r = Spawn(o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ok());
  EXPECT_EQ(r->output.size(), 1000u);
  EXPECT_TRUE(r->truncated);
}

// kill_with_parent: the same results as a plain Spawn (exit code, output, environment, folder,
// signal, missing program, timeout), and the program with its children dies with the parent.
TEST(SpawnKillWithParent, GivesTheProgramsOwnResult) {
  SpawnOptions o;
  o.kill_with_parent = true;
  o.argv = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"};
  auto r = Spawn(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->output, "out\n");
  EXPECT_EQ(r->error_output, "err\n");

  o.argv = {"sh", "-c", "echo $PORTKIT_A; pwd >&2"};
  o.env_set = {"PORTKIT_A=hello"};
  o.merge_stderr = true;
  o.cwd = "/tmp";
  r = Spawn(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->ok());
  EXPECT_EQ(r->output, "hello\n/tmp\n");

  o.argv = {"sh", "-c", "kill -SEGV $$"};
  r = Spawn(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->end, ProcessResult::End::kSignaled);
  EXPECT_EQ(r->signal, SIGSEGV);

  o.argv = {"portkit-no-such-program-anywhere"};
  r = Spawn(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.status().message().find("cannot run portkit-no-such-program-anywhere"), std::string::npos);

  o.argv = {"sh", "-c", "sleep 30 & wait"};
  o.timeout_seconds = 0.3;
  r = Spawn(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->end, ProcessResult::End::kTimedOut);
  EXPECT_LT(r->seconds, 10);
}

// Whether `pid` still runs (a zombie or a missing process does not).
bool Running(int pid) {
  std::string stat = "/proc/" + std::to_string(pid) + "/stat";
  FILE* s = fopen(stat.c_str(), "r");
  if (!s) return false;
  char state = 0;
  int ignored = 0;
  char comm[256];
  bool read = fscanf(s, "%d %255s %c", &ignored, comm, &state) == 3;
  fclose(s);
  return read && state != 'Z' && state != 'X';
}

TEST(SpawnKillWithParent, TheProgramAndItsChildrenDieWhenTheParentIsKilled) {
  char tmpl[] = "/tmp/portkit_spawn_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string pidfile = std::string(tmpl) + "/pids";
  // The parent (a forked child here) starts a "compiler" that starts a child of its own, then the
  // parent is killed with SIGKILL at its timeout, as a killed tuner would be.
  ForkOptions fo;
  fo.timeout_seconds = 1.5;
  auto parent = RunForked(
      [&](int) {
        SpawnOptions o;
        o.kill_with_parent = true;
        o.argv = {"sh", "-c", "echo $$ >" + pidfile + "; sleep 300 & echo $! >>" + pidfile + "; wait"};
        auto r = Spawn(o);
        return r.ok() ? 0 : 1;
      },
      fo);
  ASSERT_TRUE(parent.ok());
  EXPECT_EQ(parent->end, ProcessResult::End::kTimedOut);
  std::vector<int> pids;
  FILE* f = fopen(pidfile.c_str(), "r");
  ASSERT_NE(f, nullptr);
  int pid = 0;
  while (fscanf(f, "%d", &pid) == 1) pids.push_back(pid);
  fclose(f);
  ASSERT_EQ(pids.size(), 2u);
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {  // at once in practice; up to 5 s on a loaded machine
    gone = !Running(pids[0]) && !Running(pids[1]);
    if (!gone) usleep(50000);
  }
  EXPECT_TRUE(gone) << "the program or its child outlived its parent";
  for (int p : pids)
    if (Running(p)) kill(p, SIGKILL);
  std::system(("rm -rf " + std::string(tmpl)).c_str());
}

TEST(RunForked, ReportComesBack) {
  int local = 5;
  auto r = RunForked(
      [&](int fd) {
        local = 7;  // the child's copy
        std::string msg = "report " + std::to_string(local);
        return WriteAllToFd(fd, msg.data(), msg.size()) ? 4 : 1;
      },
      {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_EQ(r->output, "report 7");
  EXPECT_EQ(local, 5);
}

TEST(RunForked, CrashIsASignalNotAnError) {
  auto r = RunForked(
      [](int) {
        raise(SIGSEGV);
        return 0;
      },
      {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->end, ProcessResult::End::kSignaled);
  EXPECT_EQ(r->signal, SIGSEGV);
  EXPECT_NE(r->Describe().find("killed by signal 11"), std::string::npos);
}

TEST(RunForked, HangIsKilledAtTheTimeout) {
  ForkOptions o;
  o.timeout_seconds = 0.3;
  auto r = RunForked(
      [](int) {
        while (true) pause();
        return 0;
      },
      o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->end, ProcessResult::End::kTimedOut);
}

}  // namespace
}  // namespace portkit
