// The lifecycle end to end with real processes: start, stop (graceful, template, escalation to
// the whole group), pause/resume per declared level, crash restart, send, and survival of a
// daemon crash.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "daemon_harness.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

bool ProcessAlive(pid_t pid) {
  // A zombie still answers kill(); read the state to tell.
  const std::string text = ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

std::vector<pid_t> ReadPids(const std::string& path) {
  std::vector<pid_t> pids;
  std::ifstream file(path);
  pid_t pid = 0;
  while (file >> pid) {
    pids.push_back(pid);
  }
  return pids;
}

std::string Manifest(const std::string& args, const std::string& extra = "",
                     const std::string& pause = "guaranteed",
                     const std::string& interaction = "guaranteed") {
  std::string args_toml;
  std::istringstream in(args);
  std::string word;
  std::vector<std::string> quoted;
  while (in >> word) {
    quoted.push_back("\"" + word + "\"");
  }
  return absl::StrCat("contract_version = \"1.0.0\"\n[adapter]\nkind = \"probe\"\n",
                      "[lifecycle.start]\nexec = \"", ProbePath(), "\"\nargs = [",
                      absl::StrJoin(quoted, ", "), "]\n", extra, "[capabilities.pause]\nlinux = \"",
                      pause, "\"\n", "[capabilities.interaction]\nlinux = \"", interaction, "\"\n",
                      "[metering]\nsource = \"self-reported\"\n");
}

class LifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog(); }

  void Register(const std::string& name, const std::string& manifest) {
    std::string dir = daemon_.dir() + "/m-" + name;
    std::filesystem::create_directories(dir);
    WriteFileOrDie(dir + "/adapter.toml", manifest);
    RunResult r = daemon_.Ctl({"agent", "register", name, "--manifest", dir});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  Json Show(const std::string& name) {
    RunResult r = daemon_.Ctl({"agent", "show", name, "--json"});
    std::optional<Json> doc = ParseJson(r.out);
    return doc ? (*doc)["instance"] : Json();
  }

  std::string State(const std::string& name) { return Show(name)["state"].string; }

  std::string Logs(const std::string& name) {
    std::string all;
    std::string dir = daemon_.state_dir() + "/agents/" + name + "/logs";
    std::error_code ec;
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) {
      all += ReadFileOrEmpty(f);
    }
    return all;
  }

  std::string Work(const std::string& file) { return daemon_.dir() + "/" + file; }

  // Registers and starts "hang", whose stop template records its pid and then hangs, and stops
  // it with a 1 s window (forced: the template never signals the agent). Returns the template's
  // pid, 0 (with a failure recorded) when it never ran.
  pid_t StopWithAHangingTemplate() {
    const std::string stop =
        absl::StrCat("[lifecycle.stop]\nexec = \"/bin/sh\"\nargs = [\"-c\", \"echo $$ > ",
                     Work("tmpl.pid"), "; exec sleep 777\"]\n");
    Register("hang", Manifest("--heartbeat-ms 1000", stop));
    EXPECT_EQ(daemon_.Ctl({"agent", "start", "hang"}).exit_code, 0);
    RunResult r = daemon_.Ctl({"agent", "stop", "hang", "--timeout", "1"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("stop-forced"), std::string::npos) << r.out;
    if (!WaitFor([&] { return !ReadFileOrEmpty(Work("tmpl.pid")).empty(); })) {
      ADD_FAILURE() << "the stop template never ran";
      return 0;
    }
    return static_cast<pid_t>(std::stol(ReadFileOrEmpty(Work("tmpl.pid"))));
  }

  DaemonHarness daemon_;
};

TEST_F(LifecycleTest, StartRunStopGraceful) {
  Register("a", Manifest("--heartbeat-ms 50 --stop-marker " + Work("stopped")));
  RunResult start = daemon_.Ctl({"agent", "start", "a"});
  ASSERT_EQ(start.exit_code, 0) << start.err << start.out;
  EXPECT_NE(start.out.find("a: running (adapter-ready)"), std::string::npos) << start.out;
  Json shown = Show("a");
  ASSERT_TRUE(shown["pid"].IsInteger());
  const pid_t pid = static_cast<pid_t>(shown["pid"].Int());
  EXPECT_TRUE(ProcessAlive(pid));
  EXPECT_EQ(getpgid(pid), pid);  // its own process group
  EXPECT_EQ(getsid(pid), pid);   // and its own session
  RunResult stop = daemon_.Ctl({"agent", "stop", "a"});
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_NE(stop.out.find("stopped (stop-graceful)"), std::string::npos) << stop.out;
  EXPECT_FALSE(ProcessAlive(pid));
  EXPECT_NE(ReadFileOrEmpty(Work("stopped")).find("stopped"), std::string::npos);
  // The transitions are in the log as engine lines, in order.
  std::string logs = Logs("a");
  size_t starting = logs.find("engine transition registered -> starting");
  size_t running = logs.find("engine transition starting -> running (adapter-ready)");
  size_t stopping = logs.find("engine transition running -> stopping");
  size_t stopped = logs.find("engine transition stopping -> stopped (stop-graceful)");
  EXPECT_NE(starting, std::string::npos) << logs;
  EXPECT_LT(starting, running);
  EXPECT_LT(running, stopping);
  EXPECT_LT(stopping, stopped);
  EXPECT_NE(stopped, std::string::npos);
}

TEST_F(LifecycleTest, WorkingDirectoryEnvironmentAndStdin) {
  Register("env", Manifest("--dump " + Work("dump.json"), "env = { FROM_TEMPLATE = \"yes\" }\n"));
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "env"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return !ReadFileOrEmpty(Work("dump.json")).empty(); }));
  std::optional<Json> dump = ParseJson(ReadFileOrEmpty(Work("dump.json")));
  ASSERT_TRUE(dump.has_value());
  EXPECT_EQ((*dump)["cwd"].string, daemon_.state_dir() + "/agents/env");
  EXPECT_EQ((*dump)["env"]["FROM_TEMPLATE"].string, "yes");
  EXPECT_EQ((*dump)["stdin_kind"].string, "pipe");
  EXPECT_TRUE((*dump)["env"].Find("PATH") != nullptr);
  EXPECT_TRUE((*dump)["env"].Find("KTESIO_SOCKET") == nullptr);  // filtered base only
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "env", "--timeout", "0"}).exit_code, 0);
}

TEST_F(LifecycleTest, NoInteractionMeansDevNullStdin) {
  Register("quiet", Manifest("--dump " + Work("q.json"), "", "guaranteed", "unsupported"));
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "quiet"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return !ReadFileOrEmpty(Work("q.json")).empty(); }));
  std::optional<Json> dump = ParseJson(ReadFileOrEmpty(Work("q.json")));
  ASSERT_TRUE(dump.has_value());
  EXPECT_EQ((*dump)["stdin_kind"].string, "devnull");
  RunResult send = daemon_.Ctl({"agent", "send", "quiet", "hi"});
  EXPECT_EQ(send.exit_code, 5);
  EXPECT_NE(send.err.find("interaction.linux = \"unsupported\""), std::string::npos) << send.err;
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "quiet", "--timeout", "0"}).exit_code, 0);
}

TEST_F(LifecycleTest, MissingExecutableIsLaunchErrorNamingIt) {
  std::string manifest = Manifest("");
  manifest = absl::StrReplaceAll(manifest, {{ProbePath(), "/nonexistent/agent-binary"}});
  Register("nope", manifest);
  RunResult start = daemon_.Ctl({"agent", "start", "nope", "--json"});
  EXPECT_EQ(start.exit_code, 1);
  std::optional<Json> doc = ParseJson(start.out);
  ASSERT_TRUE(doc.has_value()) << start.out;
  EXPECT_EQ((*doc)["instance"]["state"].string, "failed");
  EXPECT_NE((*doc)["instance"]["failed_cause"].string.find("/nonexistent/agent-binary"),
            std::string::npos);
  EXPECT_NE((*doc)["instance"]["failed_cause"].string.find("launch-error"), std::string::npos);
}

TEST_F(LifecycleTest, ImmediateExitIsLaunchErrorWithExitCode) {
  Register("quick", Manifest("--exit-immediately --exit-code 3"));
  RunResult start = daemon_.Ctl({"agent", "start", "quick"});
  EXPECT_EQ(start.exit_code, 1) << start.out;
  EXPECT_NE(start.out.find("failed"), std::string::npos);
  EXPECT_NE(start.out.find("exit code 3"), std::string::npos) << start.out;
  EXPECT_NE(start.out.find(ProbePath()), std::string::npos) << start.out;
}

TEST_F(LifecycleTest, StopKillsTermIgnoringTreeAfterWindow) {
  Register("stubborn", Manifest("--ignore-sigterm --spawn-children 3 --pid-file " + Work("pids")));
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "stubborn"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return ReadPids(Work("pids")).size() == 4; }));
  std::vector<pid_t> pids = ReadPids(Work("pids"));
  for (pid_t pid : pids) {
    EXPECT_TRUE(ProcessAlive(pid));
  }
  RunResult stop = daemon_.Ctl({"agent", "stop", "stubborn", "--timeout", "1"});
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_NE(stop.out.find("stop-forced"), std::string::npos) << stop.out;
  for (pid_t pid : pids) {
    EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(pid); }, std::chrono::milliseconds(3000)))
        << "pid " << pid << " survived the stop";
  }
}

TEST_F(LifecycleTest, NothingTheAgentMovedOutOfItsGroupSurvivesStopOrExit) {
  // The agent starts a worker in a session of its own (setsid): the stop's group signals miss
  // it, so the shim must find and kill it when the agent ends. Once on stop, once when the agent
  // exits by itself (restart.policy = never: the worker must not outlive that run either).
  auto manifest = [&](const std::string& pid_file, const std::string& then) {
    return "contract_version = \"1.0.0\"\n[adapter]\nkind = \"escaper\"\n"
           "[lifecycle.start]\nexec = \"/bin/sh\"\nargs = [\"-c\", \"\"\"\n"
           "setsid /bin/sh -c 'echo $$ > " +
           pid_file + "; while :; do sleep 0.1; done' &\n" + then +
           "\n\"\"\"]\n[capabilities.pause]\nlinux = \"guaranteed\"\n"
           "[metering]\nsource = \"self-reported\"\n";
  };
  Register("escaper", manifest(Work("escaped.pid"), "while :; do sleep 0.2; done"));
  Register("quitter", manifest(Work("left.pid"), "sleep 1; exit 3"));
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "quitter", "restart.policy", "never"}).exit_code,
            0);
  for (const char* name : {"escaper", "quitter"}) {
    ASSERT_EQ(daemon_.Ctl({"agent", "start", name}).exit_code, 0);
  }
  ASSERT_TRUE(WaitFor([&] {
    return ReadPids(Work("escaped.pid")).size() == 1 && ReadPids(Work("left.pid")).size() == 1;
  }));
  const pid_t escaped = ReadPids(Work("escaped.pid"))[0];
  const pid_t left = ReadPids(Work("left.pid"))[0];
  ASSERT_TRUE(ProcessAlive(escaped));
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "escaper", "--timeout", "2"}).exit_code, 0);
  EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(escaped); }, std::chrono::milliseconds(3000)))
      << "the setsid worker survived the stop";
  ASSERT_TRUE(WaitFor([&] { return State("quitter") == "failed"; }));
  EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(left); }, std::chrono::milliseconds(3000)))
      << "the setsid worker outlived the agent's exit";
}

TEST_F(LifecycleTest, StopTemplateIsTheGracefulPhase) {
  std::string stop =
      absl::StrCat("[lifecycle.stop]\nexec = \"", ProbePath(),
                   "\"\nargs = [\"shutdown\", \"--pid-file\", \"", Work("agent.pid"), "\"]\n");
  Register("tmpl", Manifest("--ignore-sigterm --pid-file " + Work("agent.pid"), stop));
  // The template's SIGTERM is ignored by this probe, so the window expires and the group is
  // killed; what matters here is that the template, not a signal, was the graceful phase.
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "tmpl"}).exit_code, 0);
  RunResult r = daemon_.Ctl({"agent", "stop", "tmpl", "--timeout", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(Logs("tmpl").find("stop template started"), std::string::npos);
}

TEST_F(LifecycleTest, AStopTemplateThatHangsDoesNotOutliveItsStop) {
  // The agent ignores nothing, but the template never signals it: the window ends, the group is
  // killed, and the template is killed too once the window plus 5 s have passed.
  const pid_t tmpl = StopWithAHangingTemplate();
  ASSERT_GT(tmpl, 0);
  EXPECT_EQ(kill(tmpl, 0), 0) << "the template runs during the stop window";
  EXPECT_TRUE(WaitFor([&] { return kill(tmpl, 0) != 0; }, std::chrono::seconds(15)))
      << "the stop template (pid " << tmpl << ") outlived its stop by more than 5 s";
}

// The template's limit is the daemon's timer: a daemon that shuts down first kills it with its
// group instead of leaving it to hang on for good (the kit's private daemon included).
TEST_F(LifecycleTest, AStopTemplateStillRunningDiesWithTheDaemonsShutdown) {
  const pid_t tmpl = StopWithAHangingTemplate();
  ASSERT_GT(tmpl, 0);
  ASSERT_EQ(kill(tmpl, 0), 0) << "the template ended before its limit";
  ASSERT_EQ(daemon_.Stop(), 0) << daemon_.DaemonLog();
  // Its limit (1 s + 5 s from the stop's start) is still seconds away: only the shutdown kills it.
  EXPECT_TRUE(WaitFor([&] { return kill(tmpl, 0) != 0; }, std::chrono::seconds(3)))
      << "the stop template (pid " << tmpl << ") outlived the daemon";
  EXPECT_NE(daemon_.DaemonLog().find("template killed with its process group at shutdown"),
            std::string::npos)
      << daemon_.DaemonLog();
}

TEST_F(LifecycleTest, StopTemplateGraceful) {
  std::string stop =
      absl::StrCat("[lifecycle.stop]\nexec = \"", ProbePath(),
                   "\"\nargs = [\"shutdown\", \"--pid-file\", \"", Work("g.pid"), "\"]\n");
  Register("grace", Manifest("--pid-file " + Work("g.pid") + " --stop-marker " + Work("gm"), stop));
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "grace"}).exit_code, 0);
  RunResult r = daemon_.Ctl({"agent", "stop", "grace", "--timeout", "10"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("stop-graceful"), std::string::npos) << r.out;
  EXPECT_FALSE(ReadFileOrEmpty(Work("gm")).empty());
}

TEST_F(LifecycleTest, GuaranteedPauseFreezesTheGroup) {
  Register("p", Manifest("--heartbeat-ms 20 --heartbeat-file " + Work("beat")));
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "p"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return !ReadFileOrEmpty(Work("beat")).empty(); }));
  RunResult pause = daemon_.Ctl({"agent", "pause", "p"});
  ASSERT_EQ(pause.exit_code, 0) << pause.err;
  EXPECT_NE(pause.out.find("paused"), std::string::npos);
  const pid_t pid = static_cast<pid_t>(Show("p")["pid"].Int());
  ASSERT_TRUE(WaitFor([&] {
    std::string status = ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/stat");
    return status.find(") T ") != std::string::npos;
  }));
  std::string frozen = ReadFileOrEmpty(Work("beat"));
  usleep(200 * 1000);  // a window in which ~10 beats would have happened
  EXPECT_EQ(ReadFileOrEmpty(Work("beat")), frozen);
  ASSERT_EQ(daemon_.Ctl({"agent", "resume", "p"}).exit_code, 0);
  EXPECT_TRUE(WaitFor([&] { return ReadFileOrEmpty(Work("beat")) != frozen; }));
  // Stop from paused works too.
  ASSERT_EQ(daemon_.Ctl({"agent", "pause", "p"}).exit_code, 0);
  RunResult stop = daemon_.Ctl({"agent", "stop", "p"});
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
}

TEST_F(LifecycleTest, UnsupportedPauseFailsFastQuotingTheDeclaration) {
  Register("u", Manifest("--heartbeat-ms 1000", "", "unsupported"));
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "u"}).exit_code, 0);
  RunResult pause = daemon_.Ctl({"agent", "pause", "u"});
  EXPECT_EQ(pause.exit_code, 5);
  EXPECT_NE(pause.err.find("pause.linux = \"unsupported\""), std::string::npos) << pause.err;
  EXPECT_EQ(State("u"), "running");
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "u", "--timeout", "0"}).exit_code, 0);
}

TEST_F(LifecycleTest, BestEffortPauseRunsTemplateWithQualifier) {
  std::string hooks = absl::StrCat(
      "[lifecycle.pause]\nexec = \"", ProbePath(), "\"\nargs = [\"pause-hook\", \"--marker\", \"",
      Work("pm"), "\"]\n[lifecycle.resume]\nexec = \"", ProbePath(),
      "\"\nargs = [\"resume-hook\", \"--marker\", \"", Work("rm"), "\"]\n");
  Register("be", Manifest("--heartbeat-ms 1000", hooks, "best-effort"));
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "be"}).exit_code, 0);
  RunResult pause = daemon_.Ctl({"agent", "pause", "be"});
  ASSERT_EQ(pause.exit_code, 0) << pause.err;
  EXPECT_NE(pause.out.find("pause-best-effort"), std::string::npos) << pause.out;
  EXPECT_NE(pause.err.find("best-effort"), std::string::npos) << pause.err;
  EXPECT_TRUE(WaitFor([&] { return !ReadFileOrEmpty(Work("pm")).empty(); }));
  RunResult resume = daemon_.Ctl({"agent", "resume", "be"});
  EXPECT_NE(resume.out.find("resume-best-effort"), std::string::npos) << resume.out;
  EXPECT_TRUE(WaitFor([&] { return !ReadFileOrEmpty(Work("rm")).empty(); }));
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "be", "--timeout", "0"}).exit_code, 0);
}

TEST_F(LifecycleTest, ASendToABestEffortChannelSaysSo) {
  // "best-effort — surfaced honestly (a qualifier), never silently treated as guaranteed": the
  // line is written, and the answer says the agent may not act on it.
  Register("bi", Manifest("--heartbeat-ms 1000", "", "guaranteed", "best-effort"));
  Register("gi", Manifest("--heartbeat-ms 1000"));
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "bi"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "gi"}).exit_code, 0);
  RunResult best = daemon_.Ctl({"agent", "send", "bi", "hello"});
  EXPECT_EQ(best.exit_code, 0) << best.err;
  EXPECT_NE(best.err.find("ktctl: note: interaction is best-effort on linux"), std::string::npos)
      << best.err;
  RunResult json = daemon_.Ctl({"agent", "send", "bi", "hello", "--json"});
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_EQ(json.out, "{\"schema_version\":1,\"instance\":\"bi\",\"bytes_written\":6}\n");
  EXPECT_NE(json.err.find("best-effort"), std::string::npos) << json.err;
  RunResult guaranteed = daemon_.Ctl({"agent", "send", "gi", "hello"});
  EXPECT_EQ(guaranteed.exit_code, 0) << guaranteed.err;
  EXPECT_EQ(guaranteed.err, "");
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "bi", "--timeout", "0"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "gi", "--timeout", "0"}).exit_code, 0);
}

TEST_F(LifecycleTest, InvalidTransitionsExit4) {
  Register("t", Manifest("--heartbeat-ms 1000"));
  RunResult stop = daemon_.Ctl({"agent", "stop", "t"});
  EXPECT_EQ(stop.exit_code, 4);
  EXPECT_NE(stop.err.find("cannot stop an Agent Instance while it is 'registered'"),
            std::string::npos)
      << stop.err;
  EXPECT_EQ(daemon_.Ctl({"agent", "pause", "t"}).exit_code, 4);
  EXPECT_EQ(daemon_.Ctl({"agent", "resume", "t"}).exit_code, 4);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "t"}).exit_code, 0);
  EXPECT_EQ(daemon_.Ctl({"agent", "start", "t"}).exit_code, 4);
  EXPECT_EQ(daemon_.Ctl({"agent", "resume", "t"}).exit_code, 4);
  RunResult remove = daemon_.Ctl({"agent", "remove", "t"});
  EXPECT_EQ(remove.exit_code, 4);
  RunResult forced = daemon_.Ctl({"agent", "remove", "t", "--force"});
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(daemon_.Ctl({"agent", "show", "t"}).exit_code, 3);
}

// product.md: --force stops first. An instance already `stopping` (an operator's long stop window
// under way) is waited for, then removed.
TEST_F(LifecycleTest, RemoveForceWaitsForAStopUnderWay) {
  Register("slow", Manifest("--ignore-sigterm --heartbeat-ms 1000"));
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "slow"}).exit_code, 0);
  RunResult stop;
  std::thread stopper([&] { stop = daemon_.Ctl({"agent", "stop", "slow", "--timeout", "2"}); });
  EXPECT_TRUE(WaitFor([&] {
    return daemon_.Ctl({"agent", "show", "slow"}).out.find("stopping") != std::string::npos;
  }));
  RunResult refused = daemon_.Ctl({"agent", "remove", "slow"});
  EXPECT_EQ(refused.exit_code, 4) << refused.err;
  // Two at once (the second waiter ran after the first had removed the instance: under ASan
  // this is where a use of the removed instance's runtime would show).
  RunResult other;
  std::thread second([&] { other = daemon_.Ctl({"agent", "remove", "slow", "--force"}); });
  RunResult forced = daemon_.Ctl({"agent", "remove", "slow", "--force"});
  second.join();
  stopper.join();
  EXPECT_TRUE((forced.exit_code == 0 && (other.exit_code == 0 || other.exit_code == 3)) ||
              (other.exit_code == 0 && forced.exit_code == 3))
      << forced.exit_code << " " << forced.err << " / " << other.exit_code << " " << other.err;
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_EQ(daemon_.Ctl({"agent", "show", "slow"}).exit_code, 3);
  // The name is free and nothing of the old instance lingers (no restart scheduled for it).
  Register("slow", Manifest("--heartbeat-ms 1000"));
  EXPECT_EQ(daemon_.Ctl({"agent", "stop", "--all"}).exit_code, 0);
  EXPECT_NE(daemon_.Ctl({"agent", "show", "slow"}).out.find("registered"), std::string::npos);
}

TEST_F(LifecycleTest, MalformedNamesAreUsageErrorsOnEveryVerb) {
  // Exit 2 (INVALID_NAME) whatever the verb, alone or with other names; an unknown but
  // well-formed name stays exit 3.
  Register("t", Manifest("--heartbeat-ms 1000"));
  for (const std::vector<std::string>& verb :
       std::vector<std::vector<std::string>>{{"agent", "start"},
                                             {"agent", "stop"},
                                             {"agent", "restart"},
                                             {"agent", "pause"},
                                             {"agent", "resume"},
                                             {"agent", "show"},
                                             {"agent", "remove"}}) {
    for (const char* bad : {"../x", "a b", "Upper"}) {
      std::vector<std::string> args = verb;
      args.insert(args.end(), {"--json", bad});
      RunResult r = daemon_.Ctl(args);
      EXPECT_EQ(r.exit_code, 2) << verb[1] << " " << bad << "\n" << r.out << r.err;
      EXPECT_NE(r.out.find("INVALID_NAME"), std::string::npos) << verb[1] << " " << bad << r.out;
    }
    std::vector<std::string> unknown = verb;
    unknown.push_back("nope");
    EXPECT_EQ(daemon_.Ctl(unknown).exit_code, 3) << verb[1];
    if (verb[1] == "show") {
      continue;  // one name only
    }
    std::vector<std::string> several = verb;  // the worst per-instance code wins: at least 2
    several.insert(several.end(), {"--json", "t", "../x"});
    RunResult many = daemon_.Ctl(several);
    EXPECT_NE(many.exit_code, 0) << verb[1];
    EXPECT_NE(many.exit_code, 3) << verb[1] << many.out;
    EXPECT_NE(many.out.find("INVALID_NAME"), std::string::npos) << verb[1] << many.out;
  }
  RunResult send = daemon_.Ctl({"agent", "send", "../x", "hello"});
  EXPECT_EQ(send.exit_code, 2) << send.err;
  EXPECT_EQ(daemon_.Ctl({"agent", "show", "t", "--json"}).exit_code, 0);  // nothing changed
}

TEST_F(LifecycleTest, CrashRestartsAtOnceThenBacksOff) {
  Register("crashy", Manifest("--crash-after-ms 500 --exit-code 3"));
  // A 3 s back-off window: wide enough for the polls below on a loaded (sanitizer) run.
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "crashy", "restart.backoff_initial_ms", "3000"})
                .exit_code,
            0);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "crashy"}).exit_code, 0);
  const int64_t first_pid = Show("crashy")["pid"].Int();
  // First crash: restarted at once with a new pid and a new run.
  ASSERT_TRUE(WaitFor([&] {
    Json s = Show("crashy");
    return s["restart_count"].Int() >= 1 && s["state"].string == "running" &&
           s["pid"].Int() != first_pid;
  }));
  std::string logs = Logs("crashy");
  EXPECT_NE(logs.find("running -> failed (crashed{exit code 3})"), std::string::npos) << logs;
  EXPECT_NE(logs.find("failed -> starting (restarted{count=1,waited_ms=0})"), std::string::npos)
      << logs;
  // Second crash waits the back-off (3 s): an operator stop in that window cancels the pending
  // restart, which would otherwise have come by the end of the sleep below.
  ASSERT_TRUE(WaitFor([&] { return Show("crashy")["state"].string == "failed"; }));
  RunResult stop = daemon_.Ctl({"agent", "stop", "crashy"});
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_NE(stop.err.find("cancelled"), std::string::npos) << stop.err;
  usleep(3500 * 1000);
  EXPECT_EQ(Show("crashy")["state"].string, "failed");
  EXPECT_EQ(Show("crashy")["restart_count"].Int(), 1);
}

TEST_F(LifecycleTest, CleanExitUnderOnFailureEndsStopped) {
  Register("done", Manifest("--crash-after-ms 400 --exit-code 0"));
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "done"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return State("done") == "stopped"; }));
  EXPECT_NE(Logs("done").find("running -> stopped (exited)"), std::string::npos);
}

TEST_F(LifecycleTest, SendReachesStdinAndIsCaptured) {
  Register("echo", Manifest("--echo"));
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "echo"}).exit_code, 0);
  RunResult send = daemon_.Ctl({"agent", "send", "echo", "hello there"});
  ASSERT_EQ(send.exit_code, 0) << send.err;
  EXPECT_TRUE(WaitFor([&] {
    return Logs("echo").find("agent-out echo: hello there") != std::string::npos;
  })) << Logs("echo");
  RunOptions piped;
  piped.stdin_text = "piped line\n";
  RunResult from_stdin = daemon_.Ctl({"agent", "send", "echo", "--stdin"}, piped);
  ASSERT_EQ(from_stdin.exit_code, 0) << from_stdin.err;
  EXPECT_TRUE(WaitFor([&] { return Logs("echo").find("echo: piped line") != std::string::npos; }));
  ASSERT_EQ(daemon_.Ctl({"agent", "pause", "echo"}).exit_code, 0);
  EXPECT_EQ(daemon_.Ctl({"agent", "send", "echo", "x"}).exit_code, 4);
}

TEST_F(LifecycleTest, AgentsSurviveDaemonCrashAndAreReadopted) {
  Register("survivor", Manifest("--echo --heartbeat-ms 50"));
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "survivor"}).exit_code, 0);
  const int64_t pid = Show("survivor")["pid"].Int();
  daemon_.Kill();
  EXPECT_TRUE(ProcessAlive(static_cast<pid_t>(pid)));
  // Output keeps being captured while the daemon is down.
  std::string before = Logs("survivor");
  ASSERT_TRUE(WaitFor([&] { return Logs("survivor").size() > before.size(); }));
  ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
  Json shown = Show("survivor");
  EXPECT_EQ(shown["state"].string, "running");
  EXPECT_EQ(shown["pid"].Int(), pid);
  ASSERT_EQ(daemon_.Ctl({"agent", "send", "survivor", "after restart"}).exit_code, 0);
  EXPECT_TRUE(
      WaitFor([&] { return Logs("survivor").find("echo: after restart") != std::string::npos; }));
  RunResult stop = daemon_.Ctl({"agent", "stop", "survivor"});
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_FALSE(ProcessAlive(static_cast<pid_t>(pid)));
  // Output written before, during and after the daemon's absence: every heartbeat exactly once,
  // in order, none missing.
  std::istringstream in(Logs("survivor"));
  std::string line;
  long expected = 1;
  while (std::getline(in, line)) {
    size_t at = line.find(" agent-out heartbeat ");
    if (at == std::string::npos) {
      continue;
    }
    EXPECT_EQ(std::stol(line.substr(at + 21)), expected) << line;
    ++expected;
  }
  EXPECT_GT(expected, 3);
}

TEST_F(LifecycleTest, CrashWhileDaemonDownGetsRealExitAndRestart) {
  Register("down", Manifest("--heartbeat-ms 1000"));
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "down"}).exit_code, 0);
  const int64_t pid = Show("down")["pid"].Int();
  daemon_.Kill();
  ASSERT_EQ(kill(static_cast<pid_t>(pid), SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] { return !ProcessAlive(static_cast<pid_t>(pid)); }));
  // The shim held the grant for an immediate restart, so it relaunches the agent with no daemon
  // up (docs/shim.md, respawn in place) and records the exit for the next daemon.
  const std::string run_dir = daemon_.state_dir() + "/agents/down/run";
  ASSERT_TRUE(WaitFor([&] { return !ReadFileOrEmpty(run_dir + "/respawned").empty(); }));
  const pid_t relaunched = std::stoi(ReadFileOrEmpty(run_dir + "/agent.pid"));
  EXPECT_NE(relaunched, pid);
  EXPECT_TRUE(ProcessAlive(relaunched));
  EXPECT_TRUE(ReadFileOrEmpty(run_dir + "/exit").empty());
  ASSERT_TRUE(daemon_.Start());
  ASSERT_TRUE(WaitFor([&] {
    Json s = Show("down");
    return s["state"].string == "running" && s["pid"].Int() == relaunched;
  }));
  EXPECT_NE(Logs("down").find("crashed{signal 9 (SIGKILL)}"), std::string::npos) << Logs("down");
  EXPECT_EQ(Show("down")["restart_count"].Int(), 1);
  // A second crash inside the streak is not covered: the daemon restarts it after its backoff.
  ASSERT_EQ(kill(relaunched, SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] {
    Json s = Show("down");
    return s["state"].string == "running" && s["restart_count"].Int() == 2 &&
           s["pid"].Int() != relaunched;
  })) << Logs("down");
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "down", "--timeout", "0"}).exit_code, 0);
}

TEST_F(LifecycleTest, SimulatedRebootFailsWithHonestCause) {
  Register("gone", Manifest("--heartbeat-ms 1000"));
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "gone"}).exit_code, 0);
  const int64_t pid = Show("gone")["pid"].Int();
  daemon_.Kill();
  // A reboot takes the shim, the agent and the shim's run files with it.
  std::string shim_pid = ReadFileOrEmpty(daemon_.state_dir() + "/agents/gone/run/shim.pid");
  ASSERT_FALSE(shim_pid.empty());
  kill(std::stoi(shim_pid), SIGKILL);
  kill(static_cast<pid_t>(pid), SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return !ProcessAlive(static_cast<pid_t>(pid)); }));
  std::filesystem::remove(daemon_.state_dir() + "/agents/gone/run/exit");
  ASSERT_TRUE(daemon_.Start());
  std::string logs;
  ASSERT_TRUE(WaitFor([&] {
    logs = Logs("gone");
    return logs.find("running -> failed (lost{") != std::string::npos;
  })) << logs;
  ASSERT_TRUE(WaitFor([&] { return State("gone") == "running"; }));  // on-failure restarts it
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "gone", "--timeout", "0"}).exit_code, 0);
}

}  // namespace
}  // namespace ktesio::testing
