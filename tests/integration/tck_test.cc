// The Conformance Test Kit end to end: ktesio-tck against a private daemon (hermetic), against a
// running daemon (--socket), on example adapters and on the deliberately broken subjects in
// tests/fixtures/tck.

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

TEST(TckTest, MockIsConformantHermetic) {
  RunResult r = Tck({"--kind", "mock", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  Json doc;
  EXPECT_EQ(Statuses(r, &doc), Expect({{"metering_engine_observed", "not_applicable"}}));
  EXPECT_EQ(doc["adapter_kind"].string, "mock");
}

TEST(TckTest, ExampleAdaptersAreConformant) {
  for (const char* example : {"echo", "self-reported"}) {
    RunResult r = Tck({"--manifest", Root() + "/examples/adapters/" + example, "--json"});
    EXPECT_EQ(r.exit_code, 0) << example << "\n" << r.out << r.err;
    EXPECT_EQ(Statuses(r, nullptr), Expect({{"metering_engine_observed", "not_applicable"}}))
        << example;
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
}

}  // namespace
}  // namespace ktesio::testing
