// Operating many agents at once through the real daemon and ktctl: fleet files (apply, diff,
// prune, recreate, export), labels and selectors, batch verbs and their exit codes.

#include <filesystem>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon_harness.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

class FleetApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
    manifest_ = WriteProbeManifest(daemon_.dir() + "/probe", "probe", "--heartbeat-ms 60000");
  }

  // Agents outlive their daemon by design: stop them so a test leaves no processes behind.
  void TearDown() override { daemon_.Ctl({"agent", "stop", "--all", "--timeout", "0"}); }

  std::string WriteFleet(const std::string& name, const std::string& text) {
    const std::string path = daemon_.dir() + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    WriteFileOrDie(path, text);
    return path;
  }

  // A fleet file with `n` instances w-0..w-(n-1) of the probe, state running, team label.
  std::string Fleet(int n, const std::string& extra = "") {
    std::string text = "[fleet]\nname = \"team-a\"\n";
    for (int i = 0; i < n; ++i) {
      absl::StrAppend(&text, "\n[agents.w-", i, "]\nmanifest = \"probe\"\nstate = \"running\"\n",
                      "labels = { team = \"", i % 2 == 0 ? "even" : "odd", "\" }\n", "[agents.w-",
                      i, ".config]\nrestart.policy = \"on-failure\"\n");
    }
    return text + extra;
  }

  std::vector<Json> Events() {
    RunOptions options;
    options.timeout = std::chrono::milliseconds(1500);
    std::vector<Json> events;
    std::istringstream lines(daemon_.Ctl({"events", "--since", "0", "--json"}, options).out);
    for (std::string line; std::getline(lines, line);) {
      if (std::optional<Json> doc = ParseJson(line)) {
        events.push_back(*doc);
      }
    }
    return events;
  }

  Json List(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"agent", "list", "--json", "--show-labels"};
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult r = daemon_.Ctl(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return ParseJson(r.out).value_or(Json());
  }

  DaemonHarness daemon_;
  std::string manifest_;
};

TEST_F(FleetApplyTest, ApplyCreatesStartsAndASecondApplyChangesNothing) {
  const std::string file = WriteFleet("fleet.toml", Fleet(4));
  RunResult diff = daemon_.Ctl({"diff", "-f", file});
  EXPECT_EQ(diff.exit_code, 1) << diff.out << diff.err;
  EXPECT_NE(diff.out.find("w-0: create + start"), std::string::npos) << diff.out;
  EXPECT_EQ(List()["instances"].array.size(), 0u) << "diff changed something";

  RunResult apply = daemon_.Ctl({"apply", "-f", file, "--json"});
  ASSERT_EQ(apply.exit_code, 0) << apply.out << apply.err;
  std::optional<Json> plan = ParseJson(apply.out);
  ASSERT_TRUE(plan.has_value()) << apply.out;
  EXPECT_TRUE((*plan)["applied"].boolean);
  ASSERT_EQ((*plan)["steps"].array.size(), 4u);
  for (const Json& step : (*plan)["steps"].array) {
    EXPECT_TRUE(step["ok"].boolean) << apply.out;
    EXPECT_EQ(step["state"].string, "running") << apply.out;
    EXPECT_EQ(step["file"].string, file);
  }
  Json list = List();
  ASSERT_EQ(list["instances"].array.size(), 4u);
  EXPECT_EQ(list["instances"].array[0]["labels"]["ktesio.io/fleet"].string, "team-a");
  EXPECT_EQ(list["instances"].array[1]["labels"]["team"].string, "odd");
  RunResult policy = daemon_.Ctl({"agent", "config", "get", "w-3", "restart.policy"});
  EXPECT_NE(policy.out.find("on-failure"), std::string::npos) << policy.out;

  const size_t events_before = Events().size();
  RunResult again = daemon_.Ctl({"apply", "-f", file});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("applied: 4 unchanged"), std::string::npos) << again.out;
  EXPECT_EQ(Events().size(), events_before) << "a no-op apply emitted events";
  EXPECT_EQ(daemon_.Ctl({"diff", "-f", daemon_.dir()}).exit_code, 0) << "a directory of files";
  RunResult twice = daemon_.Ctl({"diff", "-f", daemon_.dir(), "-f", file});
  EXPECT_EQ(twice.exit_code, 0) << "a file named twice is read once: " << twice.out << twice.err;
  const Json after = List();  // a range-for over a temporary's member would dangle
  for (const Json& instance : after["instances"].array) {
    EXPECT_EQ(instance["restart_count"].Int(), 0) << "a no-op apply restarted something";
  }
}

// A start carried out whose run ended `failed` is a launch failure: counted "with an error", its
// cause shown, exit 1 (docs/fleet-file.md); the JSON step carries state and cause.
TEST_F(FleetApplyTest, AStartThatEndsFailedIsReportedAsAnError) {
  WriteProbeManifest(daemon_.dir() + "/dies", "dies", "--exit-immediately --exit-code 3");
  const std::string file = WriteFleet(
      "dies.toml",
      "[fleet]\nname = \"d\"\n[agents.dies-1]\nmanifest = \"dies\"\nstate = \"running\"\n"
      "[agents.dies-1.config]\nrestart.policy = \"never\"\n");
  RunResult apply = daemon_.Ctl({"apply", "-f", file});
  EXPECT_EQ(apply.exit_code, 1) << apply.out << apply.err;
  EXPECT_NE(apply.out.find("dies-1: create + start -> failed ("), std::string::npos) << apply.out;
  EXPECT_NE(apply.out.find("    error: "), std::string::npos) << apply.out;
  EXPECT_NE(apply.out.find("applied: 1 with an error\n"), std::string::npos) << apply.out;

  ASSERT_EQ(daemon_.Ctl({"agent", "remove", "dies-1"}).exit_code, 0);
  RunResult json = daemon_.Ctl({"apply", "-f", file, "--json"});
  EXPECT_EQ(json.exit_code, 1) << json.out << json.err;
  std::optional<Json> plan = ParseJson(json.out);
  ASSERT_TRUE(plan.has_value() && (*plan)["steps"].array.size() == 1) << json.out;
  const Json& step = (*plan)["steps"].array[0];
  EXPECT_EQ(step["state"].string, "failed") << json.out;
  EXPECT_FALSE(step["cause"].string.empty()) << json.out;
}

// A config value holding a newline or an escape sequence is shown quoted as TOML writes it: the
// plan goes to a terminal. A name holding one keeps the problem on one line.
TEST_F(FleetApplyTest, HostileTextInAFleetStaysOnOneLine) {
  const std::string file =
      WriteFleet("text.toml",
                 "[fleet]\nname = \"t\"\n[agents.t-1]\nkind = \"mock\"\n[agents.t-1.config]\n"
                 "model = \"x\\ny\\u001b[31mred\"\n");
  RunResult diff = daemon_.Ctl({"diff", "-f", file});
  EXPECT_EQ(diff.exit_code, 1) << diff.out << diff.err;
  EXPECT_NE(diff.out.find("config model = \"x\\ny\\u001B[31mred\""), std::string::npos) << diff.out;
  EXPECT_EQ(diff.out.find('\x1b'), std::string::npos) << diff.out;

  const std::string bad = WriteFleet(
      "name.toml", "[fleet]\nname = \"t\"\n[agents.\"a\\nb\\u001b[2J\"]\nkind = \"mock\"\n");
  RunResult refused = daemon_.Ctl({"diff", "-f", bad});
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("a\\x0ab\\x1b[2J"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.err.find('\x1b'), std::string::npos) << refused.err;
}

TEST_F(FleetApplyTest, BadFilesAreRefusedWholeWithEveryProblemAndNothingChanges) {
  const std::string file = WriteFleet("bad.toml", R"([fleet]
name = "team-a"
colour = "red"

[agents.good]
manifest = "probe"

[agents.a1]
manifest = "missing-dir"
labls = { x = "y" }

[agents.a2]
kind = "mock"
labels = { "Bad Key" = "v" }

[agents.a2.config]
"agent.OPENAI_API_KEY" = "sk-abcdefghijklmnopqrstuvwxyz123456"
modle = "x"
)");
  RunResult r = daemon_.Ctl({"apply", "-f", file});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  for (const std::string expected :
       {":3: unknown key 'colour'", ":9: agents.a1: no adapter.toml", ":10: unknown key 'labls'",
        ":14: agents.a2: invalid label key 'Bad Key'",
        ":17: agents.a2: config 'agent.OPENAI_API_KEY' holds a literal credential",
        ":18: agents.a2: unknown config key 'modle'; did you mean 'model'?"}) {
    EXPECT_NE(r.err.find(expected), std::string::npos) << expected << "\n" << r.err;
  }
  EXPECT_EQ(r.err.find("sk-abcdefghijklmnopqrstuvwxyz123456"), std::string::npos)
      << "the secret was echoed";
  EXPECT_EQ(List()["instances"].array.size(), 0u) << "a refused fleet created something";

  RunResult json = daemon_.Ctl({"apply", "-f", file, "--json"});
  std::optional<Json> doc = ParseJson(json.out);
  ASSERT_TRUE(doc.has_value()) << json.out;
  EXPECT_EQ((*doc)["error"]["reason"].string, "FLEET_INVALID");

  // Each problem once: a table with neither manifest nor kind, an invalid name (ktctl's parse
  // and the daemon both judge names).
  const std::string once = WriteFleet("once.toml", R"([fleet]
name = "x"

[agents.neither]
labels = { a = "b" }

[agents.Bad_Name]
kind = "mock"
)");
  RunResult single = daemon_.Ctl({"apply", "-f", once});
  EXPECT_EQ(single.exit_code, 2) << single.err;
  EXPECT_NE(single.err.find("2 problems"), std::string::npos) << single.err;
  EXPECT_NE(single.err.find("once.toml:4: agents.neither: give exactly one of manifest"),
            std::string::npos)
      << single.err;
  EXPECT_NE(single.err.find("once.toml:7: invalid instance name 'Bad_Name'"), std::string::npos)
      << single.err;
  EXPECT_EQ(single.err.find(":0:"), std::string::npos) << single.err;

  // Nothing readable at all: ktctl's one problem, without the daemon's "no fleet given".
  for (const char* unreadable : {"/dev/zero", "/nonexistent/fleet.toml"}) {
    RunResult none = daemon_.Ctl({"diff", "-f", unreadable});
    EXPECT_EQ(none.exit_code, 2) << none.err;
    EXPECT_NE(none.err.find(": 1 problem\n"), std::string::npos) << none.err;
    EXPECT_EQ(none.err.find("no fleet given"), std::string::npos) << none.err;
  }

  // Duplicates across files, and a fleet beyond max_instances.
  const std::string dup =
      WriteFleet("dup/b.toml", "[fleet]\nname = \"x\"\n[agents.good]\nkind = \"mock\"\n");
  WriteFleet("dup/a.toml", "[fleet]\nname = \"x\"\n[agents.good]\nkind = \"mock\"\n");
  RunResult twice = daemon_.Ctl({"apply", "-f", daemon_.dir() + "/dup"});
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.err.find("declared twice"), std::string::npos) << twice.err;
}

TEST_F(FleetApplyTest, AFileThatCannotBeReachedSaysWhy) {
  // A symlink loop is not a missing file: the system's reason is given.
  const std::string loop = daemon_.dir() + "/loop.toml";
  ASSERT_EQ(symlink(loop.c_str(), loop.c_str()), 0);
  const RunResult looped = daemon_.Ctl({"diff", "-f", loop});
  EXPECT_NE(looped.exit_code, 0);
  EXPECT_NE(looped.err.find(loop + ": Too many levels of symbolic links"), std::string::npos)
      << looped.err;
  const RunResult missing = daemon_.Ctl({"diff", "-f", daemon_.dir() + "/none.toml"});
  EXPECT_NE(missing.err.find("none.toml: no such file or directory"), std::string::npos)
      << missing.err;
}

// Hundreds of problems are more than a gRPC status carries to a client with the default 8 KiB
// metadata limit: the list is cut (and counted), never replaced by a transport error.
TEST_F(FleetApplyTest, HundredsOfProblemsAreCutAndCounted) {
  std::filesystem::create_directories(daemon_.dir() + "/bad");
  WriteFileOrDie(daemon_.dir() + "/bad/adapter.toml",
                 "contract_version = \"1.0.0\"\n[adapter]\nkind = \"bad\"\n"
                 "[lifecycle.start]\nexec = \"/bin/sleep\"\nargs = [\"1000\"]\n");
  std::string text = "[fleet]\nname = \"many\"\n";
  for (int i = 0; i < 300; ++i) {
    absl::StrAppend(&text, "[agents.b-", i, "]\nmanifest = \"bad\"\n");
  }
  const std::string file = WriteFleet("many.toml", text);
  RunResult r = daemon_.Ctl({"apply", "-f", file});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("the fleet was not applied (nothing changed): 300 problems"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("agents.b-0: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("missing mandatory section [capabilities]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("more lines not shown"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("metadata"), std::string::npos) << r.err;

  // With a problem ktctl finds itself, the daemon's cut list is merged, the count kept whole.
  const std::string mixed = WriteFleet("mixed.toml", "colour = \"red\"\n" + text);
  RunResult m = daemon_.Ctl({"apply", "-f", mixed});
  EXPECT_EQ(m.exit_code, 2) << m.out << m.err;
  EXPECT_NE(m.err.find("(nothing changed): 301 problems"), std::string::npos) << m.err;
  EXPECT_NE(m.err.find(":1: unknown key 'colour'"), std::string::npos) << m.err;
  EXPECT_NE(m.err.rfind("more lines not shown"), std::string::npos) << m.err;
  EXPECT_GT(m.err.rfind("more lines not shown"), m.err.rfind("agents.b-")) << m.err;
  EXPECT_EQ(List()["instances"].array.size(), 0u) << "a refused fleet created something";
}

TEST_F(FleetApplyTest, TooManyInstancesAreRefusedWhole) {
  DaemonHarness small;
  const std::string config = small.dir() + "/ktesiod.toml";
  WriteFileOrDie(config, "max_instances = 3\n");
  ASSERT_TRUE(small.Start({"--config", config})) << small.DaemonLog();
  WriteProbeManifest(small.dir() + "/probe", "probe", "--heartbeat-ms 60000");
  const std::string file = small.dir() + "/fleet.toml";
  WriteFileOrDie(file, Fleet(10000));
  RunResult r = small.Ctl({"apply", "-f", file});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("it would create 10000 instances, 10000 in all, beyond max_instances = 3"),
            std::string::npos)
      << r.err;
  RunResult list = small.Ctl({"agent", "list", "--json"});
  EXPECT_EQ(ParseJson(list.out).value_or(Json())["instances"].array.size(), 0u);
}

TEST_F(FleetApplyTest, AnInterruptedApplyConvergesOnTheNextOne) {
  const std::string file = WriteFleet("fleet.toml", Fleet(30));
  // The client killed mid-apply: the daemon carries on or stops where it is; nothing is torn.
  RunOptions hasty;
  hasty.timeout = std::chrono::milliseconds(150);
  daemon_.Ctl({"apply", "-f", file}, hasty);
  // The daemon SIGKILLed mid-apply.
  RunResult killed;
  std::thread applier([&] { killed = daemon_.Ctl({"apply", "-f", file}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  daemon_.Kill();
  applier.join();
  ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
  RunResult again = daemon_.Ctl({"apply", "-f", file});
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_EQ(daemon_.Ctl({"diff", "-f", file}).exit_code, 0) << "not converged";
  Json list = List();
  ASSERT_EQ(list["instances"].array.size(), 30u);
  for (const Json& instance : list["instances"].array) {
    EXPECT_EQ(instance["state"].string, "running") << instance["name"].string;
    EXPECT_EQ(instance["labels"]["ktesio.io/fleet"].string, "team-a") << instance["name"].string;
  }
}

TEST_F(FleetApplyTest, PruneRemovesOnlyOwnedInstancesAndRecreateNeedsTheFlag) {
  const std::string file = WriteFleet("fleet.toml", Fleet(3));
  ASSERT_EQ(daemon_.Ctl({"apply", "-f", file}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "register", "byhand", "--manifest", manifest_}).exit_code, 0);

  // w-2 leaves the file; w-1's manifest changes.
  const std::string changed =
      WriteProbeManifest(daemon_.dir() + "/probe2", "probe", "--heartbeat-ms 30000");
  std::string text = Fleet(2);
  const std::string old_w1 = "[agents.w-1]\nmanifest = \"probe\"";
  text.replace(text.find(old_w1), old_w1.size(), "[agents.w-1]\nmanifest = \"probe2\"");
  WriteFileOrDie(file, text);

  RunResult refused = daemon_.Ctl({"apply", "--prune", "-f", file});
  EXPECT_EQ(refused.exit_code, 4) << refused.out << refused.err;
  EXPECT_NE(refused.out.find("w-1: recreate"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("--recreate"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("w-2: prune"), std::string::npos) << refused.out;
  // The refused recreate is an error in the summary, not a recreate.
  EXPECT_NE(refused.out.find("applied: 1 prune, 1 unchanged, 1 with an error\n"), std::string::npos)
      << refused.out;
  Json list = List();
  ASSERT_EQ(list["instances"].array.size(), 3u) << "byhand, w-0, w-1";
  EXPECT_EQ(list["instances"].array[0]["name"].string, "byhand");
  // Only the refused recreate left: the apply changed nothing, the plan still differs.
  RunResult only_refused = daemon_.Ctl({"apply", "-f", file, "--json"});
  EXPECT_EQ(only_refused.exit_code, 4) << only_refused.out;
  EXPECT_FALSE(ParseJson(only_refused.out).value_or(Json())["changed"].boolean) << only_refused.out;
  EXPECT_EQ(daemon_.Ctl({"diff", "-f", file}).exit_code, 1);

  RunResult recreated = daemon_.Ctl({"apply", "--prune", "--recreate", "-f", file});
  EXPECT_EQ(recreated.exit_code, 0) << recreated.out << recreated.err;
  EXPECT_NE(ReadFileOrEmpty(daemon_.state_dir() + "/agents/w-1/adapter.json").find("30000"),
            std::string::npos)
      << "re-registered from the new manifest";
  RunResult show = daemon_.Ctl({"agent", "show", "w-1", "--json"});
  EXPECT_NE(show.out.find("\"running\""), std::string::npos) << "its running state restored";
  EXPECT_EQ(daemon_.Ctl({"apply", "--prune", "-f", file}).exit_code, 0);
  EXPECT_EQ(daemon_.Ctl({"diff", "--prune", "-f", file}).exit_code, 0) << "converged";
}

TEST_F(FleetApplyTest, ExportRoundTripsThroughApply) {
  RunOptions secret;
  secret.stdin_text = "sk-test-value-123456";
  ASSERT_EQ(daemon_.Ctl({"secret", "set", "openai"}, secret).exit_code, 0);
  const std::string file =
      WriteFleet("fleet.toml", Fleet(2,
                                     "[agents.w-0.config.budget.tokens]\nper_run = 5000\n"
                                     "[agents.helper]\nkind = \"mock\"\n[agents.helper.config]\n"
                                     "\"agent.OPENAI_API_KEY\" = \"secret:openai\"\n"));
  RunResult applied = daemon_.Ctl({"apply", "-f", file});
  ASSERT_EQ(applied.exit_code, 0) << applied.out << applied.err;
  RunResult exported = daemon_.Ctl({"export", "--name", "team-a"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_NE(exported.out.find("secret:openai"), std::string::npos) << exported.out;
  EXPECT_EQ(exported.out.find("sk-test-value"), std::string::npos) << "a secret value exported";
  const std::string round = WriteFleet("export/exported.toml", exported.out);
  RunResult diff = daemon_.Ctl({"diff", "-f", round});
  EXPECT_EQ(diff.exit_code, 0) << exported.out << "\n" << diff.out << diff.err;
}

TEST_F(FleetApplyTest, SelectorsAndSeveralNamesDriveManyInstancesAtOnce) {
  ASSERT_EQ(daemon_.Ctl({"apply", "-f", WriteFleet("fleet.toml", Fleet(4))}).exit_code, 0);

  RunResult stop = daemon_.Ctl({"agent", "stop", "--selector", "team=even", "--timeout", "5"});
  EXPECT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  EXPECT_EQ(stop.out, "w-0: stopped (stop-graceful)\nw-2: stopped (stop-graceful)\n");
  Json odd = List({"--selector", "team!=even"});
  ASSERT_EQ(odd["instances"].array.size(), 2u);
  EXPECT_EQ(odd["instances"].array[0]["state"].string, "running");

  // Several names, one missing: the others act, the worst code (3) wins, one line each.
  RunResult start = daemon_.Ctl({"agent", "start", "w-0", "w-1", "nope", "--json"});
  EXPECT_EQ(start.exit_code, 3) << start.out;
  std::optional<Json> results = ParseJson(start.out);
  ASSERT_TRUE(results.has_value()) << start.out;
  ASSERT_EQ(results->array.size(), 3u);
  // Ordered by name.
  EXPECT_EQ(results->array[0]["error"]["reason"].string, "NOT_FOUND") << start.out;
  EXPECT_EQ(results->array[1]["state"].string, "running") << start.out;
  ASSERT_EQ(results->array[2]["notices"].array.size(), 1u) << start.out;
  EXPECT_EQ(results->array[2]["notices"].array[0].string, "already running");

  // Pause of a mix: the stopped ones cannot be paused (4).
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "w-3"}).exit_code, 0);
  RunResult pause = daemon_.Ctl({"agent", "pause", "--all"});
  EXPECT_EQ(pause.exit_code, 4) << pause.out;
  EXPECT_NE(pause.out.find("w-3: error: cannot pause"), std::string::npos) << pause.out;
  // A refused step still reports the state the instance is in (docs/commands.md).
  RunResult refused = daemon_.Ctl({"agent", "pause", "w-2", "w-3", "--json"});
  EXPECT_EQ(refused.exit_code, 4) << refused.out;
  std::optional<Json> refused_doc = ParseJson(refused.out);
  ASSERT_TRUE(refused_doc.has_value() && refused_doc->array.size() == 2) << refused.out;
  EXPECT_FALSE(refused_doc->array[1]["ok"].boolean) << refused.out;
  EXPECT_EQ(refused_doc->array[1]["state"].string, "stopped") << refused.out;
  EXPECT_EQ(refused_doc->array[1]["cause"].string, "stop-graceful") << refused.out;
  EXPECT_EQ(daemon_.Ctl({"agent", "resume", "-l", "team in (even,odd)"}).exit_code, 4);
  RunResult kept = daemon_.Ctl({"agent", "remove", "w-0", "w-1", "--json"});  // running: refused
  EXPECT_EQ(kept.exit_code, 4) << kept.out;
  std::optional<Json> kept_doc = ParseJson(kept.out);
  ASSERT_TRUE(kept_doc.has_value() && kept_doc->array.size() == 2) << kept.out;
  EXPECT_EQ(kept_doc->array[1]["state"].string, "running") << kept.out;

  RunResult none = daemon_.Ctl({"agent", "restart", "--selector", "team=nobody"});
  EXPECT_EQ(none.exit_code, 3) << none.err;
  EXPECT_NE(none.err.find("no Agent Instance matches the selector 'team=nobody'"),
            std::string::npos);
  EXPECT_EQ(daemon_.Ctl({"agent", "stop", "-l", "team in (a"}).exit_code, 2);
  EXPECT_EQ(daemon_.Ctl({"agent", "start", "--all", "w-0"}).exit_code, 2);

  RunResult removed = daemon_.Ctl({"agent", "remove", "-l", "team=odd", "--force"});
  EXPECT_EQ(removed.exit_code, 0) << removed.out << removed.err;
  EXPECT_EQ(List()["instances"].array.size(), 2u);
}

TEST_F(FleetApplyTest, LogsAndUsageOfSeveralInstancesArePrefixedWithTheirNames) {
  WriteProbeManifest(daemon_.dir() + "/echo", "echo", "--echo --heartbeat-ms 60000",
                     "[capabilities.interaction]\nlinux = \"guaranteed\"\n"
                     "[interaction]\nchannel = \"stdio\"\n");
  std::string text = "[fleet]\nname = \"t\"\n";
  for (const char* name : {"web-1", "w2"}) {
    absl::StrAppend(&text, "[agents.", name, "]\nmanifest = \"echo\"\nstate = \"running\"\n",
                    "labels = { app = \"web\" }\n");
  }
  ASSERT_EQ(daemon_.Ctl({"apply", "-f", WriteFleet("logs.toml", text)}).exit_code, 0);
  RunOptions follow;
  follow.timeout = std::chrono::milliseconds(4000);
  RunResult live;
  std::thread follower([&] {
    live = daemon_.Ctl({"agent", "logs", "-f", "--selector", "app=web", "--tail", "0"}, follow);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  EXPECT_EQ(daemon_.Ctl({"agent", "send", "web-1", "one"}).exit_code, 0);
  EXPECT_EQ(daemon_.Ctl({"agent", "send", "w2", "two"}).exit_code, 0);
  follower.join();
  EXPECT_NE(live.out.find("web-1 | "), std::string::npos) << live.out;
  EXPECT_NE(live.out.find("echo: one"), std::string::npos) << live.out;
  EXPECT_NE(live.out.find("w2    | "), std::string::npos) << live.out;
  EXPECT_NE(live.out.find("echo: two"), std::string::npos) << live.out;

  RunResult retained = daemon_.Ctl({"agent", "logs", "web-1", "w2", "--stream", "out"});
  EXPECT_EQ(retained.exit_code, 0) << retained.err;
  EXPECT_LT(retained.out.find("echo: one"), retained.out.find("echo: two")) << "time order";

  // Following, the retained lines of every instance come first, merged in time order (not one
  // instance's block after another's), then live ones.
  EXPECT_EQ(daemon_.Ctl({"agent", "send", "web-1", "three"}).exit_code, 0);
  RunOptions brief;
  brief.timeout = std::chrono::milliseconds(1500);
  RunResult merged = daemon_.Ctl({"agent", "logs", "-f", "web-1", "w2", "--stream", "out"}, brief);
  const size_t one = merged.out.find("echo: one");
  const size_t two = merged.out.find("echo: two");
  const size_t three = merged.out.find("echo: three");
  ASSERT_NE(three, std::string::npos) << merged.out;
  EXPECT_LT(one, two) << merged.out;
  EXPECT_LT(two, three) << merged.out;

  RunResult usage = daemon_.Ctl({"agent", "usage", "--selector", "app=web", "--json"});
  EXPECT_EQ(usage.exit_code, 0) << usage.err;
  std::optional<Json> doc = ParseJson(usage.out);
  ASSERT_TRUE(doc.has_value()) << usage.out;
  ASSERT_EQ(doc->array.size(), 2u);
  EXPECT_EQ(doc->array[0]["instance"].string, "w2");
  EXPECT_TRUE(doc->array[1]["usage"].Find("cumulative_input_tokens") != nullptr);
  EXPECT_EQ(daemon_.Ctl({"agent", "logs", "--selector", "app=none"}).exit_code, 3);
}

TEST_F(FleetApplyTest, LabelsAreValidatedAndReservedKeysRefused) {
  ASSERT_EQ(daemon_.Ctl({"agent", "register", "a", "--manifest", manifest_}).exit_code, 0);
  RunResult set = daemon_.Ctl({"agent", "label", "a", "team=x", "example.com/tier=1"});
  EXPECT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out, "a: labels example.com/tier=1,team=x\n");
  EXPECT_EQ(daemon_.Ctl({"agent", "label", "a", "team-"}).out, "a: labels example.com/tier=1\n");
  EXPECT_EQ(daemon_.Ctl({"agent", "label", "a", "ktesio.io/fleet=x"}).exit_code, 2);
  EXPECT_EQ(daemon_.Ctl({"agent", "label", "a", "Bad Key=1"}).exit_code, 2);
  EXPECT_EQ(daemon_.Ctl({"agent", "label", "a", "k=-bad"}).exit_code, 2);
  EXPECT_EQ(daemon_.Ctl({"agent", "label", "a", "novalue"}).exit_code, 2);
  EXPECT_EQ(daemon_.Ctl({"agent", "label", "ghost", "k=v"}).exit_code, 3);
  EXPECT_EQ(List()["instances"].array[0]["labels"].Keys(),
            std::vector<std::string>{"example.com/tier"});
  // Label columns: a list, a repeated -L, or both; each key once, in the order given.
  ASSERT_EQ(daemon_.Ctl({"agent", "label", "a", "team=y"}).exit_code, 0);
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"-L", "team,example.com/tier"},
        std::vector<std::string>{"-L", "team", "-L", "example.com/tier", "-L", "team"}}) {
    std::vector<std::string> args = {"agent", "list"};
    args.insert(args.end(), flags.begin(), flags.end());
    const RunResult table = daemon_.Ctl(args);
    ASSERT_EQ(table.exit_code, 0) << table.err;
    const std::string header = table.out.substr(0, table.out.find('\n'));
    const size_t team = header.find("TEAM");
    const size_t tier = header.find("EXAMPLE.COM/TIER");
    ASSERT_NE(team, std::string::npos) << header;
    ASSERT_NE(tier, std::string::npos) << header;
    EXPECT_LT(team, tier) << header;
    EXPECT_EQ(header.find("TEAM", team + 1), std::string::npos) << header;
    // Instance a's line ends with its two label values, in the columns' order.
    const std::string row = table.out.substr(header.size() + 1);
    EXPECT_TRUE(row.substr(0, row.find('\n')).ends_with(" y     1")) << table.out;
  }
  // A column must be a label key `agent label` would take: a usage error otherwise.
  for (const char* bad : {"bad key", ",", "-x"}) {
    const RunResult refused = daemon_.Ctl({"agent", "list", "-L", bad});
    EXPECT_EQ(refused.exit_code, 2) << bad << ": " << refused.out << refused.err;
    EXPECT_TRUE(refused.out.empty()) << refused.out;
  }
  EXPECT_NE(daemon_.Ctl({"agent", "list", "-L", "bad key"}).err.find("invalid label key 'bad key'"),
            std::string::npos);
  // The frozen list document is unchanged unless labels are asked for.
  RunResult plain = daemon_.Ctl({"agent", "list", "--json"});
  EXPECT_EQ(plain.out.find("\"labels\""), std::string::npos) << plain.out;
}

}  // namespace
}  // namespace ktesio::testing
