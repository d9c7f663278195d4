// Layered config, secrets, delivery into native mechanisms, and memory backings end to end.

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "daemon_harness.h"
#include "fake_provider.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

std::string Manifest(const std::string& dump, const std::string& extra_config = "") {
  return absl::StrCat(
      "contract_version = \"1.0.0\"\n[adapter]\nkind = \"cfg\"\n[lifecycle.start]\nexec = \"",
      ProbePath(), "\"\nargs = [\"--dump\", \"", dump,
      "\"]\nenv = { TEMPLATE_VAR = \"t\", MODEL = \"from-template\" }\n",
      "[capabilities.pause]\nlinux = \"guaranteed\"\n[capabilities.interaction]\n",
      "linux = \"guaranteed\"\n[metering]\nsource = \"self-reported\"\n",
      "[config.model]\nenv = \"MODEL\"\n[config.\"budget.tokens.per_run\"]\nflag = "
      "\"--print-env\"\n",
      "[config.\"memory.dir\"]\nenv = \"AGENT_MEMORY\"\n",
      "[config.\"restart.policy\"]\nfile = { path = \"conf/agent.toml\", key = "
      "\"supervisor.policy\" }\n",
      extra_config);
}

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
    dump_ = daemon_.dir() + "/dump.json";
    std::filesystem::create_directories(daemon_.dir() + "/m");
    WriteFileOrDie(daemon_.dir() + "/m/adapter.toml", Manifest(dump_));
    ASSERT_EQ(daemon_.Ctl({"agent", "register", "c", "--manifest", daemon_.dir() + "/m"}).exit_code,
              0);
    home_ = daemon_.state_dir() + "/agents/c";
  }

  std::optional<Json> StartAndDump(RunResult* start_out = nullptr) {
    std::filesystem::remove(dump_);
    RunResult start = daemon_.Ctl({"agent", "start", "c"});
    if (start_out != nullptr) {
      *start_out = start;
    }
    if (start.exit_code != 0) {
      return std::nullopt;
    }
    WaitFor([&] { return !ReadFileOrEmpty(dump_).empty(); });
    std::optional<Json> dump = ParseJson(ReadFileOrEmpty(dump_));
    daemon_.Ctl({"agent", "stop", "c", "--timeout", "0"});
    return dump;
  }

  DaemonHarness daemon_;
  std::string dump_;
  std::string home_;
};

TEST_F(ConfigTest, SetGetUnsetWithProvenance) {
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "c", "model", "m1"}).exit_code, 0);
  RunResult get = daemon_.Ctl({"agent", "config", "get", "c", "--json"});
  ASSERT_EQ(get.exit_code, 0);
  std::optional<Json> doc = ParseJson(get.out);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->Keys(), (std::vector<std::string>{"schema_version", "entries"}));
  bool saw_model = false;
  bool saw_default = false;
  for (const Json& entry : (*doc)["entries"].array) {
    EXPECT_EQ(entry.Keys(), (std::vector<std::string>{"key", "value", "source", "unvalidated"}));
    if (entry["key"].string == "model") {
      saw_model = entry["value"].string == "m1" && entry["source"].string == "instance";
    }
    if (entry["key"].string == "restart.policy") {
      saw_default =
          entry["value"].string == "on-failure" && entry["source"].string == "engine-default";
    }
  }
  EXPECT_TRUE(saw_model);
  EXPECT_TRUE(saw_default);
  // Numbers are JSON numbers and booleans booleans (product.md §3); rates are decimal strings.
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "c", "budget.tokens.per_run", "500"}).exit_code,
            0);
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "c", "cost.rate.input", "2.5"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "c", "agent.N", "7"}).exit_code, 0);
  const std::string typed = daemon_.Ctl({"agent", "config", "get", "c", "--json"}).out;
  for (const std::string& want : {std::string(R"({"key":"budget.tokens.per_run","value":500,)"),
                                  std::string(R"({"key":"autostart","value":false,)"),
                                  std::string(R"({"key":"logs.keep","value":3,)"),
                                  std::string(R"({"key":"cost.rate.input","value":"2.5",)"),
                                  std::string(R"({"key":"agent.N","value":"7",)")}) {
    EXPECT_NE(typed.find(want), std::string::npos) << want << " in " << typed;
  }
  EXPECT_NE(daemon_.Ctl({"agent", "config", "set", "c", "restart.max_consecutive", "9", "--json"})
                .out.find(R"("entry":{"key":"restart.max_consecutive","value":9,)"),
            std::string::npos);
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "unset", "c", "model"}).exit_code, 0);
  EXPECT_EQ(daemon_.Ctl({"agent", "config", "get", "c", "model"}).exit_code, 3);
  // A pass-through value holding terminal controls: escaped in text, exact in JSON.
  const RunResult set = daemon_.Ctl({"agent", "config", "set", "c", "agent.C", "\x1b[2Jx\ny"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out, "agent.C = \\x1b[2Jx\\ny\n");
  EXPECT_EQ(daemon_.Ctl({"agent", "config", "get", "c", "agent.C"}).out,
            "agent.C  \\x1b[2Jx\\ny  (instance, unvalidated)\n");
  EXPECT_NE(daemon_.Ctl({"agent", "config", "get", "c", "agent.C", "--json"})
                .out.find(R"("value":"\u001b[2Jx\ny")"),
            std::string::npos);
}

TEST_F(ConfigTest, UnknownKeySuggestsAndLeavesFileUnchanged) {
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "c", "model", "m1"}).exit_code, 0);
  const std::string before = ReadFileOrEmpty(home_ + "/config.toml");
  RunResult r = daemon_.Ctl({"agent", "config", "set", "c", "restart.polcy", "never"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("restart.policy"), std::string::npos) << r.err;
  RunResult bad_value = daemon_.Ctl({"agent", "config", "set", "c", "restart.policy", "often"});
  EXPECT_EQ(bad_value.exit_code, 2);
  RunResult money = daemon_.Ctl({"agent", "config", "set", "c", "cost.rate.input", "1.0000001"});
  EXPECT_EQ(money.exit_code, 2);
  RunResult reserved = daemon_.Ctl({"agent", "config", "set", "c", "memory.dir", "/tmp"});
  EXPECT_NE(reserved.exit_code, 0);
  EXPECT_EQ(ReadFileOrEmpty(home_ + "/config.toml"), before);
}

TEST_F(ConfigTest, DeliveryThroughEnvFlagFileAndPassThrough) {
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "c", "model", "gpt-test"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "c", "budget.tokens.per_run", "500"}).exit_code,
            0);
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "c", "agent.EXTRA_THING", "x y"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "c", "restart.policy", "never"}).exit_code, 0);
  RunResult start;
  std::optional<Json> dump = StartAndDump(&start);
  ASSERT_TRUE(dump.has_value()) << start.err << start.out;
  EXPECT_EQ((*dump)["env"]["MODEL"].string, "gpt-test");  // config wins over the template
  EXPECT_NE(start.err.find("MODEL"), std::string::npos) << start.err;  // shadowing reported
  EXPECT_EQ((*dump)["env"]["EXTRA_THING"].string, "x y");
  EXPECT_EQ((*dump)["env"]["TEMPLATE_VAR"].string, "t");
  const Json& argv = (*dump)["argv"];
  ASSERT_GE(argv.array.size(), 2u);
  EXPECT_EQ(argv.array[argv.array.size() - 2].string, "--print-env");
  EXPECT_EQ(argv.array.back().string, "500");
  std::string file = ReadFileOrEmpty(home_ + "/conf/agent.toml");
  EXPECT_NE(file.find("[supervisor]"), std::string::npos) << file;
  EXPECT_NE(file.find("policy = \"never\""), std::string::npos) << file;
  std::optional<Json> effective = ParseJson(ReadFileOrEmpty(home_ + "/effective-config.json"));
  ASSERT_TRUE(effective.has_value());
  EXPECT_EQ((*effective)["schema_version"].Int(), 1);
}

// A secret is at most 64 KiB: ktctl stops reading just past that, so a device is refused too.
TEST_F(ConfigTest, AnOversizedSecretIsRefusedBeforeItIsSent) {
  RunResult zero = daemon_.Ctl({"secret", "set", "big", "--from-file", "/dev/zero"});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("longer than 65536 bytes"), std::string::npos) << zero.err;
  RunOptions in;
  in.stdin_text = std::string(65536, 'k') + "\n";
  EXPECT_EQ(daemon_.Ctl({"secret", "set", "edge"}, in).exit_code, 0) << "exactly the limit";
  EXPECT_EQ(daemon_.Ctl({"secret", "list"}).out, "edge\n");
  // A directory opens but cannot be read: an I/O error naming it, not an "empty value".
  RunResult dir = daemon_.Ctl({"secret", "set", "from-dir", "--from-file", daemon_.dir()});
  EXPECT_EQ(dir.exit_code, 1);
  EXPECT_NE(dir.err.find("it is a directory"), std::string::npos) << dir.err;
  EXPECT_EQ(daemon_.Ctl({"secret", "list"}).out, "edge\n");
}

TEST_F(ConfigTest, SecretsAreDeliveredOnlyToTheirTarget) {
  const std::string cleartext = "s3cr3t-VALUE-never-shown";
  RunOptions in;
  in.stdin_text = cleartext + "\n";
  ASSERT_EQ(daemon_.Ctl({"secret", "set", "api_key"}, in).exit_code, 0);
  struct stat st {};
  ASSERT_EQ(stat((daemon_.state_dir() + "/secrets.toml").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  RunResult list = daemon_.Ctl({"secret", "list"});
  EXPECT_EQ(list.out, "api_key\n");
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "c", "model", "secret:api_key"}).exit_code, 0);
  std::optional<Json> dump = StartAndDump();
  ASSERT_TRUE(dump.has_value());
  EXPECT_EQ((*dump)["env"]["MODEL"].string, cleartext);
  // The metrics endpoint too: restart the daemon with it on (the agent keeps running).
  ASSERT_EQ(daemon_.Stop(), 0);
  ASSERT_TRUE(daemon_.Start({"--metrics-listen", "127.0.0.1:0"})) << daemon_.DaemonLog();
  std::optional<Json> status = ParseJson(daemon_.Ctl({"daemon", "status", "--json"}).out);
  ASSERT_TRUE(status.has_value());
  const std::string address = (*status)["metrics_address"].string;
  const HttpResponse scrape = HttpRequest(
      static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))), "GET", "/metrics");
  ASSERT_EQ(scrape.status, 200) << scrape.error;
  EXPECT_NE(scrape.body.find("agent=\"c\""), std::string::npos);
  // Every display masks it; only --reveal shows it.
  std::vector<std::string> outputs = {
      scrape.body,
      daemon_.Ctl({"agent", "config", "get", "c"}).out,
      daemon_.Ctl({"agent", "config", "get", "c", "--json"}).out,
      daemon_.Ctl({"agent", "show", "c", "--json"}).out,
      daemon_.Ctl({"agent", "list", "--json"}).out,
      daemon_.Ctl({"agent", "logs", "c"}).out,
      daemon_.DaemonLog(),
      ReadFileOrEmpty(home_ + "/effective-config.json"),
      ReadFileOrEmpty(home_ + "/config.toml"),
      ReadFileOrEmpty(daemon_.state_dir() + "/state.db"),
      ReadFileOrEmpty(daemon_.state_dir() + "/state.db-wal"),
  };
  for (const std::string& output : outputs) {
    EXPECT_EQ(output.find(cleartext), std::string::npos) << output.substr(0, 400);
  }
  EXPECT_NE(daemon_.Ctl({"agent", "config", "get", "c", "model"}).out.find("secret:****"),
            std::string::npos);
  EXPECT_NE(daemon_.Ctl({"agent", "config", "get", "c", "model", "--reveal"}).out.find(cleartext),
            std::string::npos);
}

TEST_F(ConfigTest, UnresolvedSecretRefusesStartWithStateUnchanged) {
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "c", "model", "secret:missing_one"}).exit_code,
            0);
  RunResult start = daemon_.Ctl({"agent", "start", "c"});
  EXPECT_EQ(start.exit_code, 1);
  EXPECT_NE(start.err.find("missing_one"), std::string::npos) << start.err;
  std::optional<Json> show = ParseJson(daemon_.Ctl({"agent", "show", "c", "--json"}).out);
  EXPECT_EQ((*show)["instance"]["state"].string, "registered");
}

TEST_F(ConfigTest, ARestartWhoseDeliveryWouldBeRefusedLeavesTheAgentRunning) {
  // configuration.md: every launch renders delivery first and launches nothing on refusal. A
  // restart is a stop and a launch: the stop must not happen when the launch would be refused.
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "c"}).exit_code, 0);
  const auto pid_of_c = [&] {
    std::optional<Json> show = ParseJson(daemon_.Ctl({"agent", "show", "c", "--json"}).out);
    return show ? (*show)["instance"]["pid"].Int() : -1;
  };
  const long long pid = pid_of_c();
  ASSERT_GT(pid, 0);
  // A secret that no longer resolves: the delivery would be refused (exit 1, DELIVERY_FAILED).
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "c", "model", "secret:gone_one"}).exit_code, 0);
  RunResult restart = daemon_.Ctl({"agent", "restart", "c"});
  EXPECT_EQ(restart.exit_code, 1) << restart.out << restart.err;
  EXPECT_NE(restart.err.find("gone_one"), std::string::npos) << restart.err;
  EXPECT_NE(restart.err.find("keeps running"), std::string::npos) << restart.err;
  // A hand-edited instance file the daemon refuses (an unknown key): exit 2, CONFIG_INVALID.
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "unset", "c", "model"}).exit_code, 0);
  {
    std::ofstream edit(home_ + "/config.toml", std::ios::app);
    edit << "bogus_key = 1\n";
  }
  restart = daemon_.Ctl({"agent", "restart", "c"});
  EXPECT_EQ(restart.exit_code, 2) << restart.out << restart.err;
  EXPECT_NE(restart.err.find("bogus_key"), std::string::npos) << restart.err;
  std::optional<Json> show = ParseJson(daemon_.Ctl({"agent", "show", "c", "--json"}).out);
  ASSERT_TRUE(show.has_value());
  EXPECT_EQ((*show)["instance"]["state"].string, "running");
  EXPECT_EQ((*show)["instance"]["pid"].Int(), pid);
  EXPECT_EQ((*show)["instance"]["restart_count"].Int(), 0);
}

TEST_F(ConfigTest, EnvPlaceholderMustBeSetBeforeLaunch) {
  ASSERT_EQ(
      daemon_.Ctl({"agent", "config", "set", "c", "model", "{env:NOT_SET_ANYWHERE}"}).exit_code, 0);
  RunResult start = daemon_.Ctl({"agent", "start", "c"});
  EXPECT_EQ(start.exit_code, 1);
  EXPECT_NE(start.err.find("NOT_SET_ANYWHERE"), std::string::npos) << start.err;
  EXPECT_FALSE(std::filesystem::exists(dump_));
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "c", "model", "{env:TEMPLATE_VAR}"}).exit_code,
            0);
  std::optional<Json> dump = StartAndDump();
  ASSERT_TRUE(dump.has_value());
}

TEST_F(ConfigTest, MemoryBackingLifecycleAndDelivery) {
  RunResult attach =
      daemon_.Ctl({"agent", "memory", "attach", "c", "--kind", "filesystem", "--json"});
  ASSERT_EQ(attach.exit_code, 0) << attach.err;
  std::optional<Json> doc = ParseJson(attach.out);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->Keys(), (std::vector<std::string>{"schema_version", "instance", "kind",
                                                   "guarantee", "dir", "declared"}));
  EXPECT_EQ((*doc)["kind"].string, "filesystem");
  EXPECT_EQ((*doc)["guarantee"].string, "managed_dir_byte_durable");
  EXPECT_TRUE((*doc)["declared"].boolean);
  const std::string dir = (*doc)["dir"].string;
  EXPECT_EQ(dir, home_ + "/memory");
  WriteFileOrDie(dir + "/notes.bin", std::string("\x00\x01keep me\xff", 10));
  EXPECT_EQ(daemon_.Ctl({"agent", "memory", "attach", "c", "--kind", "filesystem"}).exit_code, 0);
  EXPECT_EQ(daemon_.Ctl({"agent", "memory", "attach", "c", "--kind", "native"}).exit_code, 4);
  EXPECT_EQ(daemon_.Ctl({"agent", "memory", "attach", "c", "--kind", "cloud"}).exit_code, 2);
  std::optional<Json> dump = StartAndDump();
  ASSERT_TRUE(dump.has_value());
  EXPECT_EQ((*dump)["env"]["AGENT_MEMORY"].string, dir);
  // Live instances cannot change backing.
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "c"}).exit_code, 0);
  EXPECT_EQ(daemon_.Ctl({"agent", "memory", "detach", "c"}).exit_code, 4);
  daemon_.Kill();
  ASSERT_TRUE(daemon_.Start());
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "c", "--timeout", "0"}).exit_code, 0);
  EXPECT_EQ(ReadFileOrEmpty(dir + "/notes.bin"), std::string("\x00\x01keep me\xff", 10));
  RunResult detach = daemon_.Ctl({"agent", "memory", "detach", "c", "--json"});
  ASSERT_EQ(detach.exit_code, 0);
  std::optional<Json> detached = ParseJson(detach.out);
  ASSERT_TRUE(detached.has_value());
  EXPECT_EQ(detached->Keys(), (std::vector<std::string>{"schema_version", "instance"}));
  EXPECT_EQ(ReadFileOrEmpty(dir + "/notes.bin"), std::string("\x00\x01keep me\xff", 10));
  RunResult native = daemon_.Ctl({"agent", "memory", "attach", "c", "--kind", "native", "--json"});
  ASSERT_EQ(native.exit_code, 0);
  EXPECT_EQ((*ParseJson(native.out))["guarantee"].string, "home_persistence_only");
}

}  // namespace
}  // namespace ktesio::testing
