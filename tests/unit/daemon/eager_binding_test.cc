// The daemon's eager symbol binding (ktesiod/memory/eager_binding.h) through a real re-exec:
// eager_binding_probe links the same .preinit_array hook as ktesiod and is spawned here with an
// environment the test controls.

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

extern char** environ;

namespace {

struct ProbeRun {
  pid_t pid = -1;
  std::vector<std::string> lines;
};

// Spawns the probe with this process's environment minus LD_BIND_NOW and the marker, plus
// EXTRA; returns its pid and its output lines.
ProbeRun RunProbe(const std::vector<std::string>& extra) {
  std::vector<std::string> env_strings;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string item = *entry;
    if (item.rfind("LD_BIND_NOW=", 0) != 0 && item.rfind("KTESIOD_EAGER_BINDING=", 0) != 0) {
      env_strings.push_back(item);
    }
  }
  env_strings.insert(env_strings.end(), extra.begin(), extra.end());
  std::vector<char*> envp;
  for (std::string& item : env_strings) {
    envp.push_back(item.data());
  }
  envp.push_back(nullptr);
  int out[2];
  ProbeRun run;
  if (pipe(out) != 0) {
    ADD_FAILURE() << "pipe";
    return run;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::string path = KTESIO_EAGER_BINDING_PROBE;
  char* argv[] = {path.data(), nullptr};
  const int spawned = posix_spawn(&run.pid, path.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  EXPECT_EQ(spawned, 0);
  std::string text;
  char chunk[512];
  for (ssize_t n = 0; (n = read(out[0], chunk, sizeof chunk)) > 0;) {
    text.append(chunk, static_cast<size_t>(n));
  }
  close(out[0]);
  int status = 0;
  EXPECT_EQ(waitpid(run.pid, &status, 0), run.pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  run.lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  return run;
}

TEST(EagerBindingTest, ReexecutesOnceInTheSameProcessAndLeavesNothingForChildren) {
  const ProbeRun run = RunProbe({});
  ASSERT_EQ(run.lines.size(), 5u) << absl::StrJoin(run.lines, "|");
  // The same process (systemd's main pid, the instance lock), now a re-executed image that was
  // executed with LD_BIND_NOW=1, i.e. bound eagerly.
  EXPECT_EQ(run.lines[0], absl::StrCat("pid ", run.pid));
  EXPECT_EQ(run.lines[1], "reexecuted yes");
  EXPECT_EQ(run.lines[4], "executed_bound_now yes");
  // What anything it starts would inherit: neither variable.
  EXPECT_EQ(run.lines[2], "ld_bind_now (unset)");
  EXPECT_EQ(run.lines[3], "marker (unset)");
}

TEST(EagerBindingTest, AnEmptyLdBindNowIsReplaced) {
  const ProbeRun run = RunProbe({"LD_BIND_NOW="});
  ASSERT_EQ(run.lines.size(), 5u) << absl::StrJoin(run.lines, "|");
  EXPECT_EQ(run.lines[1], "reexecuted yes");
  EXPECT_EQ(run.lines[2], "ld_bind_now (unset)");
  EXPECT_EQ(run.lines[4], "executed_bound_now yes");
}

TEST(EagerBindingTest, LeavesACallersOwnLdBindNowAlone) {
  const ProbeRun run = RunProbe({"LD_BIND_NOW=1"});
  ASSERT_EQ(run.lines.size(), 5u) << absl::StrJoin(run.lines, "|");
  EXPECT_EQ(run.lines[0], absl::StrCat("pid ", run.pid));
  EXPECT_EQ(run.lines[1], "reexecuted no");  // already bound eagerly: no second exec
  EXPECT_EQ(run.lines[2], "ld_bind_now 1");  // the caller's, kept for its children
  EXPECT_EQ(run.lines[3], "marker (unset)");
}

}  // namespace
