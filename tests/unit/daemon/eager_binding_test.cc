// The daemon's eager symbol binding (ktesiod/memory/eager_binding.h) through a real re-exec:
// eager_binding_probe links the same .preinit_array hook as ktesiod and is spawned here with
// arguments, an environment and a descriptor the test controls.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

extern char** environ;

namespace {

struct ProbeRun {
  pid_t pid = -1;
  std::map<std::string, std::string> facts;  // KEY -> VALUE, from the probe's lines
};

// Spawns PREFIX... probe --flag value with this process's environment minus LD_BIND_NOW and the
// marker, plus EXTRA_ENV, PROBE_KEEP=kept and PROBE_FD naming an inherited pipe descriptor.
ProbeRun RunProbe(const std::vector<std::string>& extra_env,
                  const std::vector<std::string>& prefix = {}) {
  ProbeRun run;
  int inherited[2];
  int out[2];
  if (pipe(inherited) != 0 || pipe(out) != 0) {
    ADD_FAILURE() << "pipe";
    return run;
  }
  std::vector<std::string> env_strings;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string item = *entry;
    if (item.rfind("LD_BIND_NOW=", 0) != 0 && item.rfind("KTESIOD_EAGER_BINDING=", 0) != 0) {
      env_strings.push_back(item);
    }
  }
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  env_strings.push_back("PROBE_KEEP=kept");
  env_strings.push_back(absl::StrCat("PROBE_FD=", inherited[0]));
  std::vector<char*> envp;
  for (std::string& item : env_strings) {
    envp.push_back(item.data());
  }
  envp.push_back(nullptr);
  std::vector<std::string> args = prefix;
  args.push_back(KTESIO_EAGER_BINDING_PROBE);
  args.push_back("--flag");
  args.push_back("value");
  std::vector<char*> argv;
  for (std::string& arg : args) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  const int spawned = posix_spawn(&run.pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(inherited[1]);
  EXPECT_EQ(spawned, 0);
  std::string text;
  char chunk[512];
  for (ssize_t n = 0; (n = read(out[0], chunk, sizeof chunk)) > 0;) {
    text.append(chunk, static_cast<size_t>(n));
  }
  close(out[0]);
  close(inherited[0]);
  int status = 0;
  EXPECT_EQ(waitpid(run.pid, &status, 0), run.pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << ": " << text;
  for (const std::string& line :
       std::vector<std::string>(absl::StrSplit(text, '\n', absl::SkipEmpty()))) {
    const size_t space = line.find(' ');
    if (space != std::string::npos) {
      run.facts[line.substr(0, space)] = line.substr(space + 1);
    }
  }
  return run;
}

TEST(EagerBindingTest, ReexecutesOnceAsTheSameProcessAndLeavesNothingForChildren) {
  ProbeRun run = RunProbe({});
  ASSERT_EQ(run.facts.size(), 9u);
  // The same process (systemd's main pid, the instance lock), its name, arguments, environment
  // and descriptors as they were, now an image executed with LD_BIND_NOW=1: bound eagerly.
  EXPECT_EQ(run.facts["pid"], absl::StrCat(run.pid));
  EXPECT_EQ(run.facts["reexecuted"], "yes");
  EXPECT_EQ(run.facts["executed_bound_now"], "yes");
  EXPECT_EQ(run.facts["comm"], "eager_binding_p");  // the kernel's 15-character name, not "exe"
  EXPECT_EQ(run.facts["args"], "--flag,value");
  EXPECT_EQ(run.facts["fd"], "open");
  EXPECT_EQ(run.facts["keep"], "kept");
  // What anything it starts would inherit: neither variable.
  EXPECT_EQ(run.facts["ld_bind_now"], "(unset)");
  EXPECT_EQ(run.facts["marker"], "(unset)");
}

TEST(EagerBindingTest, AnEmptyLdBindNowAndAStaleMarkerAreReplaced) {
  ProbeRun run = RunProbe({"LD_BIND_NOW=", "KTESIOD_EAGER_BINDING=1:elsewhere"});
  EXPECT_EQ(run.facts["reexecuted"], "yes");
  EXPECT_EQ(run.facts["executed_bound_now"], "yes");
  EXPECT_EQ(run.facts["comm"], "eager_binding_p");  // not the stale marker's name
  EXPECT_EQ(run.facts["ld_bind_now"], "(unset)");
  EXPECT_EQ(run.facts["marker"], "(unset)");
}

// Markers that name this very pid but were not set by the daemon: a pid that is only a prefix
// of the marker's, and the right pid without the LD_BIND_NOW=1 it stands for. A shell sets
// them and execs the probe, which keeps the shell's pid.
TEST(EagerBindingTest, AMarkerItDidNotSetIsNotTakenForItsOwn) {
  ProbeRun prefix = RunProbe(
      {}, {"/bin/sh", "-c", R"(KTESIOD_EAGER_BINDING=${$}0:bad LD_BIND_NOW=1 exec "$0" "$@")"});
  EXPECT_EQ(prefix.facts["reexecuted"], "no");  // the caller's LD_BIND_NOW: no re-exec needed
  EXPECT_EQ(prefix.facts["comm"], "eager_binding_p");
  EXPECT_EQ(prefix.facts["ld_bind_now"], "1");
  ProbeRun unbound =
      RunProbe({}, {"/bin/sh", "-c", R"(KTESIOD_EAGER_BINDING=$$:bad exec "$0" "$@")"});
  EXPECT_EQ(unbound.facts["reexecuted"], "yes");  // re-executed for real, with its own marker
  EXPECT_EQ(unbound.facts["executed_bound_now"], "yes");
  EXPECT_EQ(unbound.facts["comm"], "eager_binding_p");
  EXPECT_EQ(unbound.facts["marker"], "(unset)");
  EXPECT_EQ(unbound.facts["args"], "--flag,value");
}

// An environment too large for the hook's fixed table: it runs on as it is.
TEST(EagerBindingTest, AnEnvironmentTooLargeToCopyRunsAsItIs) {
  std::vector<std::string> padding;
  for (int i = 0; i < 4100; ++i) {
    padding.push_back(absl::StrCat("PROBE_PAD_", i, "=x"));
  }
  ProbeRun run = RunProbe(padding);
  EXPECT_EQ(run.facts["reexecuted"], "no");
  EXPECT_EQ(run.facts["comm"], "eager_binding_p");
  EXPECT_EQ(run.facts["keep"], "kept");
}

TEST(EagerBindingTest, LeavesACallersOwnLdBindNowAlone) {
  ProbeRun run = RunProbe({"LD_BIND_NOW=1"});
  EXPECT_EQ(run.facts["pid"], absl::StrCat(run.pid));
  EXPECT_EQ(run.facts["reexecuted"], "no");  // already bound eagerly: no second exec
  EXPECT_EQ(run.facts["ld_bind_now"], "1");  // the caller's, kept for its children
  EXPECT_EQ(run.facts["marker"], "(unset)");
  EXPECT_EQ(run.facts["comm"], "eager_binding_p");
}

// Started as the dynamic loader's argument, /proc/self/exe is the loader: no re-exec, and the
// program runs as it is.
TEST(EagerBindingTest, RunsAsItIsWhenStartedThroughTheDynamicLoader) {
  const std::string loader = "/lib64/ld-linux-x86-64.so.2";
  if (access(loader.c_str(), X_OK) != 0) {
    GTEST_SKIP() << "no " << loader << " here";
  }
  ProbeRun run = RunProbe({}, {loader});
  EXPECT_EQ(run.facts["reexecuted"], "no");
  EXPECT_EQ(run.facts["args"], "--flag,value");
  EXPECT_EQ(run.facts["ld_bind_now"], "(unset)");
}

}  // namespace
