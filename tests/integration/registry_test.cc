// Registering, listing, showing and removing Agent Instances through ktctl: exit codes,
// messages, the frozen JSON key sets, and "nothing is written on failure".

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "daemon_harness.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

constexpr char kValidManifest[] = R"(contract_version = "1.0.0"

[adapter]
kind = "echo-agent"
name = "Echo"

[lifecycle.start]
exec = "/bin/cat"
args = ["-u"]
env = { LOG_LEVEL = "info" }

[capabilities.pause]
linux = "guaranteed"

[capabilities.interaction]
linux = "guaranteed"
macos = "best-effort"

[metering]
source = "self-reported"

[config.model]
env = "MODEL"
)";

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog(); }

  std::string WriteManifest(const std::string& name, const std::string& content) {
    std::string dir = daemon_.dir() + "/" + name;
    std::filesystem::create_directories(dir);
    WriteFileOrDie(dir + "/adapter.toml", content);
    return dir;
  }

  bool HomeExists(const std::string& name) {
    struct stat st {};
    return stat((daemon_.state_dir() + "/agents/" + name).c_str(), &st) == 0;
  }

  int InstanceCount() {
    RunResult r = daemon_.Ctl({"agent", "list", "--json"});
    std::optional<Json> doc = ParseJson(r.out);
    return doc ? static_cast<int>((*doc)["instances"].array.size()) : -1;
  }

  DaemonHarness daemon_;
};

TEST_F(RegistryTest, RegistersBuiltinAndPrintsHomeAndCapabilities) {
  RunResult r = daemon_.Ctl({"agent", "register", "alpha", "--kind", "mock"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(daemon_.state_dir() + "/agents/alpha"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pause"), std::string::npos);
  EXPECT_NE(r.out.find("HERE (linux)"), std::string::npos);
  EXPECT_TRUE(HomeExists("alpha"));
  std::string snapshot = ReadFileOrEmpty(daemon_.state_dir() + "/agents/alpha/adapter.json");
  std::optional<Json> doc = ParseJson(snapshot);
  ASSERT_TRUE(doc.has_value()) << snapshot;
  EXPECT_EQ((*doc)["kind"].string, "mock");
  EXPECT_EQ((*doc)["capabilities"]["pause"]["linux"].string, "guaranteed");
  EXPECT_EQ((*doc)["metering_source"].string, "self-reported");
  EXPECT_EQ((*doc)["start"]["exec"].string, "ktesio-probe");
}

TEST_F(RegistryTest, RegistersManifestFromDirectoryAndFile) {
  std::string dir = WriteManifest("m", kValidManifest);
  ASSERT_EQ(daemon_.Ctl({"agent", "register", "by-dir", "--manifest", dir}).exit_code, 0);
  ASSERT_EQ(
      daemon_.Ctl({"agent", "register", "by-file", "--manifest", dir + "/adapter.toml"}).exit_code,
      0);
  std::string snapshot = ReadFileOrEmpty(daemon_.state_dir() + "/agents/by-dir/adapter.json");
  std::optional<Json> doc = ParseJson(snapshot);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ((*doc)["start"]["exec"].string, "/bin/cat");
  EXPECT_EQ((*doc)["start"]["args"].array.at(0).string, "-u");
  EXPECT_EQ((*doc)["start"]["env"]["LOG_LEVEL"].string, "info");
  EXPECT_EQ((*doc)["capabilities"]["interaction"]["macos"].string, "best-effort");
  EXPECT_EQ((*doc)["capabilities"]["interaction"]["windows"].string, "unsupported");
  EXPECT_EQ((*doc)["config"]["model"]["env"].string, "MODEL");
  EXPECT_EQ((*doc)["contract_version"].string, "1.0.0");
  EXPECT_EQ(InstanceCount(), 2);
}

TEST_F(RegistryTest, MissingManifestIsNotFoundAndWritesNothing) {
  RunResult r =
      daemon_.Ctl({"agent", "register", "ghost", "--manifest", daemon_.dir() + "/nowhere"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("no adapter.toml at"), std::string::npos) << r.err;
  EXPECT_FALSE(HomeExists("ghost"));
  EXPECT_EQ(InstanceCount(), 0);
}

TEST_F(RegistryTest, InvalidManifestExits1WithValidationErrorAndWritesNothing) {
  std::string content = kValidManifest;
  content.replace(content.find("exec = \"/bin/cat\""), 17, "exce = \"/bin/cat\"");
  std::string dir = WriteManifest("bad", content);
  RunResult r = daemon_.Ctl({"agent", "register", "bad", "--manifest", dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("exce"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("adapter.toml:"), std::string::npos) << r.err;
  EXPECT_FALSE(HomeExists("bad"));
  EXPECT_EQ(InstanceCount(), 0);
  // The offline linter agrees with the daemon.
  RunResult lint = RunProcess({KtctlPath(), "manifest", "lint", dir});
  EXPECT_EQ(lint.exit_code, 1);
  EXPECT_NE(lint.err.find("exce"), std::string::npos);
}

TEST_F(RegistryTest, BytesThatAreNotTextAreRefusedClearlyAndWriteNothing) {
  // A manifest that is not UTF-8, one that is not a regular file (it would never end), one over
  // the 1 MiB bound and one nesting too deep: MANIFEST_INVALID, exit 1, nothing registered, and
  // the daemon still answers.
  std::string binary = kValidManifest;
  binary += "# \xff\xfe\n";
  struct Case {
    std::string path;
    std::string needle;
  };
  std::string big(2u << 20, '#');
  // Tables nested 400,000 deep in 800 KiB: a recursive parser's stack would overflow.
  std::string deep = std::string(kValidManifest) + "[config.a";
  for (int i = 0; i < 400000; ++i) {
    deep += ".a";
  }
  deep += "]\nenv = \"X\"\n";
  const Case cases[] = {
      {WriteManifest("binary", binary), "not valid UTF-8"},
      {"/dev/zero", "not a regular file"},
      {WriteManifest("big", kValidManifest + big), "larger than 1024 KiB"},
      {WriteManifest("deep", deep), "tables nest deeper than 64 levels"},
  };
  for (const Case& c : cases) {
    RunResult r = daemon_.Ctl({"agent", "register", "x", "--manifest", c.path, "--json"});
    EXPECT_EQ(r.exit_code, 1) << c.path << r.out << r.err;
    EXPECT_NE(r.out.find("\"reason\":\"MANIFEST_INVALID\""), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(c.needle), std::string::npos) << r.out;
    RunResult lint = RunProcess({KtctlPath(), "manifest", "lint", c.path});
    EXPECT_EQ(lint.exit_code, 1) << c.path;
    EXPECT_NE(lint.err.find(c.needle), std::string::npos) << lint.err;
  }
  EXPECT_EQ(InstanceCount(), 0);
  EXPECT_EQ(daemon_.Ctl({"daemon", "status"}).exit_code, 0);
  // Arguments and stdin values that are not UTF-8 are usage errors naming the culprit.
  RunResult name = daemon_.Ctl({"agent", "show", "\xff", "--json"});
  EXPECT_EQ(name.exit_code, 2);
  EXPECT_NE(name.out.find("is not valid UTF-8 (byte 0)"), std::string::npos) << name.out;
  RunOptions binary_stdin;
  binary_stdin.stdin_text = "se\xffret\n";
  RunResult secret = daemon_.Ctl({"secret", "set", "bin"}, binary_stdin);
  EXPECT_EQ(secret.exit_code, 2);
  EXPECT_NE(secret.err.find("not valid UTF-8"), std::string::npos) << secret.err;
  EXPECT_EQ(daemon_.Ctl({"secret", "list"}).out.find("bin"), std::string::npos);
}

TEST_F(RegistryTest, ContractMajorMismatchQuotesTheRule) {
  std::string content = kValidManifest;
  content.replace(content.find("1.0.0"), 5, "2.1.0");
  std::string dir = WriteManifest("future", content);
  RunResult r = daemon_.Ctl({"agent", "register", "future", "--manifest", dir, "--json"});
  EXPECT_EQ(r.exit_code, 1);
  std::optional<Json> doc = ParseJson(r.out);
  ASSERT_TRUE(doc.has_value()) << r.out;
  EXPECT_EQ((*doc)["error"]["reason"].string, "CONTRACT_INCOMPATIBLE");
  EXPECT_EQ((*doc)["error"]["message"].string,
            "incompatible adapter contract: manifest declares 2.1.0, engine speaks 1.0.0 — "
            "compatible iff the major versions match (contract v1 policy, "
            "docs/adapter-contract.md#versioning)");
  EXPECT_FALSE(HomeExists("future"));
}

TEST_F(RegistryTest, DuplicateNameIsUsageErrorSuggestingRemove) {
  ASSERT_EQ(daemon_.Ctl({"agent", "register", "twin", "--kind", "mock"}).exit_code, 0);
  RunResult r = daemon_.Ctl({"agent", "register", "twin", "--kind", "mock"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ktctl agent remove twin"), std::string::npos) << r.err;
  EXPECT_EQ(InstanceCount(), 1);
}

TEST_F(RegistryTest, InvalidNamesAreUsageErrors) {
  for (const std::string& name :
       {std::string("Upper"), std::string("-lead"), std::string("a/b"), std::string("../x"),
        std::string(129, 'a'), std::string("sp ace"), std::string("")}) {
    RunResult r = daemon_.Ctl({"agent", "register", name, "--kind", "mock"});
    EXPECT_EQ(r.exit_code, 2) << name;
  }
  EXPECT_EQ(daemon_.Ctl({"agent", "register", std::string(128, 'a'), "--kind", "mock"}).exit_code,
            0);
  EXPECT_EQ(InstanceCount(), 1);
  std::error_code ec;
  int entries = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator(daemon_.state_dir() + "/agents", ec)) {
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST_F(RegistryTest, UnknownBuiltinKindIsUsageError) {
  RunResult r = daemon_.Ctl({"agent", "register", "x", "--kind", "nonesuch"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("hermes"), std::string::npos) << r.err;  // lists the known kinds
  EXPECT_FALSE(HomeExists("x"));
}

TEST_F(RegistryTest, RegisterNeedsExactlyOneSource) {
  EXPECT_EQ(daemon_.Ctl({"agent", "register", "x"}).exit_code, 2);
  EXPECT_EQ(
      daemon_.Ctl({"agent", "register", "x", "--kind", "mock", "--manifest", "/tmp"}).exit_code, 2);
}

TEST_F(RegistryTest, EditingManifestAfterRegistrationChangesNothing) {
  std::string dir = WriteManifest("snap", kValidManifest);
  ASSERT_EQ(daemon_.Ctl({"agent", "register", "snap", "--manifest", dir}).exit_code, 0);
  std::string before = ReadFileOrEmpty(daemon_.state_dir() + "/agents/snap/adapter.json");
  RunResult show_before = daemon_.Ctl({"agent", "show", "snap", "--json"});
  std::string edited = kValidManifest;
  edited.replace(edited.find("/bin/cat"), 8, "/bin/sh");
  edited.replace(edited.find("linux = \"guaranteed\""), 20, "linux = \"best-effort\"");
  WriteFileOrDie(dir + "/adapter.toml", edited);
  EXPECT_EQ(ReadFileOrEmpty(daemon_.state_dir() + "/agents/snap/adapter.json"), before);
  RunResult show_after = daemon_.Ctl({"agent", "show", "snap", "--json"});
  EXPECT_EQ(show_after.out, show_before.out);
  // ...and across a daemon restart.
  ASSERT_EQ(daemon_.Stop(), 0);
  ASSERT_TRUE(daemon_.Start());
  EXPECT_EQ(daemon_.Ctl({"agent", "show", "snap", "--json"}).out, show_before.out);
}

TEST_F(RegistryTest, ListJsonKeySetsAreFrozen) {
  ASSERT_EQ(daemon_.Ctl({"agent", "register", "b", "--kind", "mock"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "register", "a", "--kind", "hermes"}).exit_code, 0);
  RunResult r = daemon_.Ctl({"agent", "list", "--json"});
  ASSERT_EQ(r.exit_code, 0);
  std::optional<Json> doc = ParseJson(r.out);
  ASSERT_TRUE(doc.has_value()) << r.out;
  EXPECT_EQ(doc->Keys(), (std::vector<std::string>{"schema_version", "totals", "instances"}));
  EXPECT_EQ((*doc)["schema_version"].Int(), 2);
  EXPECT_EQ((*doc)["totals"].Keys(),
            (std::vector<std::string>{"total_input_tokens", "total_output_tokens",
                                      "dollars_partial", "unpriced_count"}));
  const Json& instances = (*doc)["instances"];
  ASSERT_EQ(instances.array.size(), 2u);
  EXPECT_EQ(instances.array[0]["name"].string, "a");  // ordered by name
  EXPECT_EQ(instances.array[1]["name"].string, "b");
  const Json& entry = instances.array[0];
  EXPECT_EQ(entry.Keys(),
            (std::vector<std::string>{"name", "kind", "state", "restart_count", "restart_policy",
                                      "budget", "usage", "metering_source", "agent_home"}));
  EXPECT_EQ(entry["kind"].string, "hermes");
  EXPECT_EQ(entry["state"].string, "registered");
  EXPECT_EQ(entry["restart_count"].Int(), 0);
  EXPECT_EQ(entry["restart_policy"].string, "on-failure");
  EXPECT_EQ(entry["budget"].type, Json::Type::kNull);
  EXPECT_EQ(entry["usage"].Keys(),
            (std::vector<std::string>{"cumulative_input_tokens", "cumulative_output_tokens",
                                      "current_run_input_tokens", "current_run_output_tokens",
                                      "unknown_usage_calls"}));
  EXPECT_TRUE(entry["usage"]["cumulative_input_tokens"].IsInteger());
}

TEST_F(RegistryTest, ShowJsonAndHumanOutput) {
  ASSERT_EQ(daemon_.Ctl({"agent", "register", "s", "--kind", "hermes"}).exit_code, 0);
  RunResult json = daemon_.Ctl({"agent", "show", "s", "--json"});
  ASSERT_EQ(json.exit_code, 0);
  std::optional<Json> doc = ParseJson(json.out);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->Keys(), (std::vector<std::string>{"schema_version", "instance"}));
  EXPECT_EQ((*doc)["instance"]["name"].string, "s");
  RunResult human = daemon_.Ctl({"agent", "show", "s"});
  ASSERT_EQ(human.exit_code, 0);
  EXPECT_NE(human.out.find("best-effort"), std::string::npos) << human.out;  // hermes pause
  EXPECT_NE(human.out.find("self-reported"), std::string::npos);
  RunResult missing = daemon_.Ctl({"agent", "show", "nobody"});
  EXPECT_EQ(missing.exit_code, 3);
}

TEST_F(RegistryTest, RemoveRetainsHomeByDefaultAndDeletesOnRequest) {
  ASSERT_EQ(daemon_.Ctl({"agent", "register", "keep", "--kind", "mock"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "register", "drop", "--kind", "mock"}).exit_code, 0);
  EXPECT_EQ(daemon_.Ctl({"agent", "remove", "keep"}).exit_code, 0);
  EXPECT_TRUE(HomeExists("keep"));
  EXPECT_EQ(daemon_.Ctl({"agent", "remove", "drop", "--delete"}).exit_code, 0);
  EXPECT_FALSE(HomeExists("drop"));
  EXPECT_EQ(InstanceCount(), 0);
  EXPECT_EQ(daemon_.Ctl({"agent", "remove", "keep"}).exit_code, 3);
  EXPECT_EQ(daemon_.Ctl({"agent", "remove", "x", "--retain", "--delete"}).exit_code, 2);
  // A retained home is reused by a new registration of the same name.
  EXPECT_EQ(daemon_.Ctl({"agent", "register", "keep", "--kind", "hermes"}).exit_code, 0);
}

TEST_F(RegistryTest, StatePersistsAcrossDaemonRestart) {
  ASSERT_EQ(daemon_.Ctl({"agent", "register", "p", "--kind", "mock"}).exit_code, 0);
  daemon_.Kill();
  ASSERT_TRUE(daemon_.Start());
  EXPECT_EQ(InstanceCount(), 1);
  RunResult status = daemon_.Ctl({"daemon", "status", "--json"});
  std::optional<Json> doc = ParseJson(status.out);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ((*doc)["instances"]["by_state"]["registered"].Int(), 1);
}

TEST(ManifestLint, ValidManifestExitsZero) {
  TempDir dir;
  WriteFileOrDie(dir / "adapter.toml", kValidManifest);
  RunResult r = RunProcess({KtctlPath(), "manifest", "lint", dir / "adapter.toml"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ok"), std::string::npos);
  RunResult json = RunProcess({KtctlPath(), "manifest", "lint", dir.path(), "--json"});
  EXPECT_EQ(json.exit_code, 0);
  std::optional<Json> doc = ParseJson(json.out);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ((*doc)["kind"].string, "echo-agent");
  EXPECT_TRUE((*doc)["valid"].boolean);
  // No adapter.toml at the path: not found (3), in text and JSON.
  RunResult missing = RunProcess({KtctlPath(), "manifest", "lint", dir / "nope"});
  EXPECT_EQ(missing.exit_code, 3) << missing.err;
  RunResult missing_json = RunProcess({KtctlPath(), "manifest", "lint", dir / "nope", "--json"});
  EXPECT_EQ(missing_json.exit_code, 3);
  EXPECT_NE(missing_json.out.find("\"MANIFEST_NOT_FOUND\""), std::string::npos) << missing_json.out;
}

}  // namespace
}  // namespace ktesio::testing
