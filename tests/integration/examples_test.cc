// Every shipped example manifest lints and registers; the runnable ones start, and per-instance
// isolation roots arrive through config.

#include <filesystem>

#include "daemon_harness.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

const std::string kExamples = KTESIO_EXAMPLES_DIR;

TEST(Examples, EveryManifestLintsAndRegisters) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start());
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kExamples)) {
    if (!std::filesystem::exists(entry.path() / "adapter.toml")) {
      continue;
    }
    ++count;
    const std::string name = entry.path().filename().string();
    RunResult lint = RunProcess({KtctlPath(), "manifest", "lint", entry.path().string()});
    EXPECT_EQ(lint.exit_code, 0) << name << ": " << lint.err;
    RunResult reg = daemon.Ctl({"agent", "register", name, "--manifest", entry.path().string()});
    EXPECT_EQ(reg.exit_code, 0) << name << ": " << reg.err;
  }
  EXPECT_GE(count, 4);
  // Engine-observed examples refuse to start until the operator names the upstream provider.
  RunResult opencode = daemon.Ctl({"agent", "start", "opencode"});
  EXPECT_EQ(opencode.exit_code, 2);
  EXPECT_NE(opencode.err.find("metering.upstream_base_url"), std::string::npos) << opencode.err;
}

TEST(Examples, SelfReportedExampleRunsWithIsolatedRoots) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start());
  ASSERT_EQ(
      daemon.Ctl({"agent", "register", "sr", "--manifest", kExamples + "/self-reported"}).exit_code,
      0);
  const std::string home = daemon.state_dir() + "/agents/sr";
  ASSERT_EQ(daemon.Ctl({"agent", "config", "set", "sr", "agent.XDG_DATA_HOME", home + "/xdg/data"})
                .exit_code,
            0);
  ASSERT_EQ(daemon.Ctl({"agent", "memory", "attach", "sr", "--kind", "filesystem"}).exit_code, 0);
  ASSERT_EQ(daemon.Ctl({"agent", "start", "sr"}).exit_code, 0);
  const pid_t pid = static_cast<pid_t>(
      (*ParseJson(daemon.Ctl({"agent", "show", "sr", "--json"}).out))["instance"]["pid"].Int());
  std::string environ = ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/environ");
  EXPECT_NE(environ.find("XDG_DATA_HOME=" + home + "/xdg/data"), std::string::npos);
  EXPECT_NE(environ.find("AGENT_MEMORY_DIR=" + home + "/memory"), std::string::npos);
  ASSERT_TRUE(WaitFor([&] {
    std::optional<Json> usage = ParseJson(daemon.Ctl({"agent", "usage", "sr", "--json"}).out);
    return usage.has_value() && (*usage)["usage"]["cumulative_input_tokens"].Int() >= 10;
  }));
  ASSERT_EQ(daemon.Ctl({"agent", "stop", "sr", "--timeout", "0"}).exit_code, 0);
}

TEST(Autostart, InstancesStartWhenTheDaemonStarts) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start());
  ASSERT_EQ(daemon.Ctl({"agent", "register", "auto", "--manifest", kExamples + "/echo"}).exit_code,
            0);
  ASSERT_EQ(
      daemon.Ctl({"agent", "register", "manual", "--manifest", kExamples + "/echo"}).exit_code, 0);
  ASSERT_EQ(daemon.Ctl({"agent", "config", "set", "auto", "autostart", "true"}).exit_code, 0);
  ASSERT_EQ(daemon.Stop(), 0);
  ASSERT_TRUE(daemon.Start());
  auto state = [&](const std::string& name) {
    std::optional<Json> doc = ParseJson(daemon.Ctl({"agent", "show", name, "--json"}).out);
    return doc.has_value() ? (*doc)["instance"]["state"].string : "";
  };
  EXPECT_TRUE(WaitFor([&] { return state("auto") == "running"; }));
  EXPECT_EQ(state("manual"), "registered");
  ASSERT_EQ(daemon.Ctl({"agent", "stop", "auto", "--timeout", "0"}).exit_code, 0);
}

}  // namespace
}  // namespace ktesio::testing
