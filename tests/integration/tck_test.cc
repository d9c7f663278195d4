// The Conformance Test Kit end to end: ktesio-tck against a private daemon (hermetic), against a
// running daemon (--socket), on example adapters and on the subjects in tests/fixtures/tck —
// including, in subject mode (--subject-program), a well-behaved shell-script subject and three
// deliberately broken ones, each of which must fail exactly its own section.

#include <string>
#include <vector>

#include "daemon_harness.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

const std::vector<std::string> kSections = {"capability_edges",
                                            "lifecycle",
                                            "pause",
                                            "config_mapping",
                                            "metering_self_reported",
                                            "metering_engine_observed",
                                            "memory",
                                            "interaction"};

std::string Root() { return KTESIO_SOURCE_DIR; }

RunResult Tck(std::vector<std::string> args) {
  args.insert(args.begin(), KTESIO_TCK_PATH);
  RunOptions options;
  options.timeout = std::chrono::milliseconds(280000);
  options.extra_env = {"KTESIOD=" + KtesiodPath(), "KTESIO_PROBE=" + ProbePath()};
  return RunProcess(args, options);
}

// section -> status, in report order; checks the document's fixed parts.
std::vector<std::pair<std::string, std::string>> Statuses(const RunResult& r, Json* doc_out) {
  std::optional<Json> doc = ParseJson(r.out);
  EXPECT_TRUE(doc.has_value()) << r.out << r.err;
  if (!doc) return {};
  const Json& d = *doc;
  EXPECT_EQ(d.Keys(), (std::vector<std::string>{"schema_version", "adapter_kind",
                                                "contract_version", "sections", "honor_system"}));
  EXPECT_EQ(d["schema_version"].Int(), 1);
  EXPECT_EQ(d["contract_version"].string, "1.0.0");
  const Json& honor = d["honor_system"];
  EXPECT_EQ(honor.array.size(), 3u);
  for (const Json& duty : honor.array) EXPECT_EQ(duty["status"].string, "unverified");
  std::vector<std::pair<std::string, std::string>> out;
  for (const Json& s : d["sections"].array) {
    const Json& result = s["result"];
    out.emplace_back(s["section"].string, result["status"].string);
    if (result["status"].string == "pass") {
      EXPECT_EQ(result.Find("reason"), nullptr) << s["section"].string;
    } else {
      EXPECT_FALSE(result["reason"].string.empty()) << s["section"].string;
    }
  }
  if (doc_out != nullptr) *doc_out = d;
  return out;
}

std::vector<std::pair<std::string, std::string>> Expect(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& s : kSections) {
    std::string status = "pass";
    for (const auto& [name, st] : overrides) {
      if (name == s) status = st;
    }
    out.emplace_back(s, status);
  }
  return out;
}

TEST(TckTest, BuiltinsAreConformantHermetic) {
  for (const char* kind : {"mock", "hermes"}) {
    RunResult r = Tck({"--kind", kind, "--json"});
    EXPECT_EQ(r.exit_code, 0) << kind << "\n" << r.out << r.err;
    Json doc;
    EXPECT_EQ(Statuses(r, &doc), Expect({{"metering_engine_observed", "not_applicable"}})) << kind;
    EXPECT_EQ(doc["adapter_kind"].string, kind);
  }
}

TEST(TckTest, ExampleAdaptersAreConformant) {
  // Every manifest in examples/adapters. The kit runs the probe under each declaration, so the
  // codex and opencode examples are certified here without those agents installed (the real
  // agents run under the daemon in tests/e2e).
  const std::vector<std::pair<std::string, std::string>> examples = {
      {"echo", "metering_engine_observed"},
      {"self-reported", "metering_engine_observed"},
      {"codex", "metering_self_reported"},
      {"opencode", "metering_self_reported"}};
  for (const auto& [example, not_applicable] : examples) {
    RunResult r = Tck({"--manifest", Root() + "/examples/adapters/" + example, "--json"});
    EXPECT_EQ(r.exit_code, 0) << example << "\n" << r.out << r.err;
    EXPECT_EQ(Statuses(r, nullptr), Expect({{not_applicable, "not_applicable"}})) << example;
  }
}

TEST(TckTest, EngineObservedFixtureIsMeteredThroughTheProxy) {
  RunResult r = Tck({"--manifest", Root() + "/tests/fixtures/tck/engine-observed", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Statuses(r, nullptr), Expect({{"metering_self_reported", "not_applicable"}}));
}

TEST(TckTest, PauseUnsupportedIsNotApplicableNotFail) {
  RunResult r =
      Tck({"--manifest", Root() + "/tests/fixtures/tck/pause-unsupported-everywhere", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  Json doc;
  EXPECT_EQ(Statuses(r, &doc),
            Expect({{"pause", "not_applicable"}, {"metering_engine_observed", "not_applicable"}}));
  for (const Json& s : doc["sections"].array) {
    if (s["section"].string == "pause") {
      EXPECT_NE(s["result"]["reason"].string.find("pause.linux = \"unsupported\" (declared)"),
                std::string::npos);
    }
  }
}

// The reason of `section` in the report.
std::string Reason(const Json& doc, const std::string& section) {
  for (const Json& s : doc["sections"].array) {
    if (s["section"].string == section) return s["result"]["reason"].string;
  }
  return "";
}

std::string Fixture(const std::string& name) { return Root() + "/tests/fixtures/tck/" + name; }

TEST(TckTest, CapabilitiesWithoutALinuxEntryProjectToUnsupported) {
  // "A capability with no entry for an OS projects to unsupported": the daemon's projection says
  // so, capability_edges agrees with the declaration, pause does not apply, and interaction
  // passes by SendInput failing fast.
  RunResult r = Tck({"--manifest", Fixture("no-linux-entries"), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Statuses(r, nullptr),
            Expect({{"pause", "not_applicable"}, {"metering_engine_observed", "not_applicable"}}));
}

TEST(TckTest, FlagsOnKeysWithEngineDefaultsDoNotFailTheProbe) {
  // The daemon appends a flag target whenever its key has a value, defaults included: every
  // section that runs the probe under this mapping must run it without those flags.
  RunResult r = Tck({"--manifest", Fixture("flags-on-defaulted-keys"), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Statuses(r, nullptr), Expect({{"metering_engine_observed", "not_applicable"}}))
      << r.out;
}

// A mapping of a key that is not a documented unified key could never deliver (config set refuses
// the key): the manifest is invalid, and every section says why.
TEST(TckTest, AMappingOfAnUndocumentedKeyIsAnInvalidManifest) {
  RunResult r = Tck(
      {"--manifest", Fixture("undocumented-config-key"), "--section", "config_mapping", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("unknown config key 'temperature' in [config.temperature]"),
            std::string::npos)
      << r.out;
  Json doc;
  EXPECT_EQ(Statuses(r, &doc),
            (std::vector<std::pair<std::string, std::string>>{{"config_mapping", "fail"}}));
}

TEST(TckTest, SubjectModePassesAWellBehavedSubject) {
  RunResult r = Tck({"--manifest", Fixture("subject-well-behaved"), "--subject-program", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  Json doc;
  EXPECT_EQ(Statuses(r, &doc), Expect({{"metering_engine_observed", "not_applicable"}}));
  EXPECT_EQ(doc["adapter_kind"].string, "tck-subject-well-behaved");
}

TEST(TckTest, SubjectModeFailsOnlyPauseWhenAWorkerEscapesTheFreeze) {
  RunResult r =
      Tck({"--manifest", Fixture("subject-pause-escapes"), "--subject-program", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  Json doc;
  EXPECT_EQ(Statuses(r, &doc),
            Expect({{"pause", "fail"}, {"metering_engine_observed", "not_applicable"}}));
  const std::string reason = Reason(doc, "pause");
  for (const char* part :
       {"paused with pause.linux = \"guaranteed\" (declared)", "processes of the agent",
        "are not stopped", "(sh) in state '", "it escaped the group's SIGSTOP"}) {
    EXPECT_NE(reason.find(part), std::string::npos) << part << "\n" << reason;
  }
  // The default mode runs the probe, not this program: it cannot see the defect.
  RunResult probe =
      Tck({"--manifest", Fixture("subject-pause-escapes"), "--section", "pause", "--json"});
  EXPECT_EQ(probe.exit_code, 0) << probe.out << probe.err;
  EXPECT_EQ(Statuses(probe, nullptr),
            (std::vector<std::pair<std::string, std::string>>{{"pause", "pass"}}));
}

TEST(TckTest, SubjectModeFailsOnlyConfigMappingWhenAWrapperDropsTheValue) {
  RunResult r = Tck({"--manifest", Fixture("subject-env-dropped"), "--subject-program", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  Json doc;
  EXPECT_EQ(Statuses(r, &doc),
            Expect({{"config_mapping", "fail"}, {"metering_engine_observed", "not_applicable"}}));
  const std::string reason = Reason(doc, "config_mapping");
  for (const char* part : {"model -> env TCK_MODEL", "reached the agent process but not pid",
                           "(sh), one of its processes", "expected TCK_MODEL=tck-"}) {
    EXPECT_NE(reason.find(part), std::string::npos) << part << "\n" << reason;
  }
  RunResult probe =
      Tck({"--manifest", Fixture("subject-env-dropped"), "--section", "config_mapping", "--json"});
  EXPECT_EQ(probe.exit_code, 0) << probe.out << probe.err;
}

TEST(TckTest, SubjectModeFailsOnlyMeteringWhenTheSubjectNeverReports) {
  RunResult r = Tck({"--manifest", Fixture("subject-usage-silent"), "--subject-program", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  Json doc;
  EXPECT_EQ(Statuses(r, &doc), Expect({{"metering_self_reported", "fail"},
                                       {"metering_engine_observed", "not_applicable"}}));
  const std::string reason = Reason(doc, "metering_self_reported");
  for (const char* part : {"no usage reported by the subject within 10 s",
                           "its captured stdout carries no KTESIO_USAGE line"}) {
    EXPECT_NE(reason.find(part), std::string::npos) << part << "\n" << reason;
  }
  RunResult probe = Tck({"--manifest", Fixture("subject-usage-silent"), "--section",
                         "metering_self_reported", "--json"});
  EXPECT_EQ(probe.exit_code, 0) << probe.out << probe.err;
}

TEST(TckTest, AgainstARunningDaemonAndOneSection) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start()) << daemon.DaemonLog();
  RunResult r =
      Tck({"--kind", "mock", "--socket", daemon.socket(), "--section", "pause", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Statuses(r, nullptr),
            (std::vector<std::pair<std::string, std::string>>{{"pause", "pass"}}));
  // The kit removed what it registered.
  RunResult list = daemon.Ctl({"agent", "list", "--json"});
  EXPECT_EQ(list.out.find("tck-"), std::string::npos) << list.out;
  // Human output: one line per section and a verdict.
  RunResult human = Tck({"--kind", "mock", "--socket", daemon.socket(), "--section", "lifecycle"});
  EXPECT_EQ(human.exit_code, 0) << human.out << human.err;
  EXPECT_NE(human.out.find("lifecycle  pass"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("verdict: conformant"), std::string::npos) << human.out;
}

TEST(TckTest, UsageAndUnreachableDaemon) {
  EXPECT_EQ(Tck({}).exit_code, 2);
  EXPECT_EQ(Tck({"--kind", "mock", "--section", "nope"}).exit_code, 2);
  EXPECT_EQ(Tck({"--kind", "mock", "--socket", "/tmp/kt-tck-no-such.sock"}).exit_code, 1);
  RunResult version = Tck({"--version"});
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_EQ(version.out.rfind("ktesio-tck ", 0), 0U) << version.out;
  EXPECT_NE(version.out.find("contract 1.0.0"), std::string::npos) << version.out;
  RunResult help = Tck({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--subject-program"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace ktesio::testing
