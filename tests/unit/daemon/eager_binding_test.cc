// memory::EnsureEagerBinding through a real re-exec: eager_binding_probe runs it as ktesiod's
// main() does, in a real process whose environment the test controls.

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace {

// The probe's output lines, run through `env` with ENV_ARGS (e.g. "-u LD_BIND_NOW").
std::vector<std::string> RunProbe(const std::string& env_args) {
  const std::string command = "env " + env_args + " " + KTESIO_EAGER_BINDING_PROBE;
  FILE* out = popen(command.c_str(), "r");
  std::string text;
  if (out != nullptr) {
    char chunk[512];
    for (size_t n = 0; (n = fread(chunk, 1, sizeof chunk, out)) > 0;) {
      text.append(chunk, n);
    }
    EXPECT_EQ(pclose(out), 0) << command;
  }
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST(EagerBindingTest, ReexecutesOnceWithTheSamePidAndLeavesNothingForChildren) {
  const std::vector<std::string> lines = RunProbe("-u LD_BIND_NOW -u KTESIOD_EAGER_BINDING");
  ASSERT_EQ(lines.size(), 5u) << absl::StrJoin(lines, "|");
  // main() ran twice, in one process: the re-exec keeps the pid (systemd's main pid, the lock).
  EXPECT_EQ(lines[0].rfind("start ", 0), 0u);
  EXPECT_EQ(lines[1], lines[0]);
  EXPECT_EQ(lines[2], "ld_bind_now (unset)");  // what agents would inherit: nothing
  EXPECT_EQ(lines[3], "marker (unset)");
  EXPECT_EQ(lines[4], "executed_bound_now yes");  // the running image was bound eagerly
}

TEST(EagerBindingTest, LeavesACallersOwnLdBindNowAlone) {
  const std::vector<std::string> lines = RunProbe("-u KTESIOD_EAGER_BINDING LD_BIND_NOW=1");
  ASSERT_EQ(lines.size(), 4u) << absl::StrJoin(lines, "|");  // one start: no re-exec
  EXPECT_EQ(lines[0].rfind("start ", 0), 0u);
  EXPECT_EQ(lines[1], "ld_bind_now 1");  // the caller's, kept for its children
  EXPECT_EQ(lines[2], "marker (unset)");
  EXPECT_EQ(lines[3], "executed_bound_now yes");
}

}  // namespace
