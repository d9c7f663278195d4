// The real agents, under the real daemon, metered through the real proxy: Codex (Responses API
// over SSE) and opencode (chat completions, streaming with include_usage) from their npm
// packages, driven through the example manifests in examples/adapters/, against the fake
// provider on loopback. The ledger must equal what the provider reported, call for call.
//
// scripts/install-agents.sh installs the pinned agents into build/agents; when npm or the
// registry was unreachable it leaves the reason in build/agents/unavailable and these tests
// report themselves skipped with it.

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "absl/strings/str_cat.h"
#include "daemon_harness.h"
#include "fake_provider.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

const std::string kAgents = KTESIO_AGENTS_DIR;
const std::string kExamples = KTESIO_EXAMPLES_DIR;
constexpr char kApiKey[] = "sk-e2e-7c1f0d9e2b";

class RealAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string unavailable = ReadFileOrEmpty(kAgents + "/unavailable");
    if (!unavailable.empty()) {
      GTEST_SKIP() << "real agents unavailable: " << unavailable;
    }
    bin_ = kAgents + "/node_modules/.bin";
    if (!std::filesystem::exists(bin_ + "/codex") || !std::filesystem::exists(bin_ + "/opencode")) {
      GTEST_SKIP() << "real agents not installed (run scripts/install-agents.sh)";
    }
    // The daemon hands its PATH to agents; the agents' own HTTP_PROXY must not capture loopback.
    const char* path = std::getenv("PATH");
    setenv("PATH", (bin_ + ":" + (path != nullptr ? path : "/usr/bin:/bin")).c_str(), 1);
    provider_ = std::make_unique<FakeProvider>(provider_dir_.path());
    ASSERT_TRUE(provider_->ok());
    ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
    RunOptions secret;
    secret.stdin_text = std::string(kApiKey) + "\n";
    ASSERT_EQ(daemon_.Ctl({"secret", "set", "provider-key"}, secret).exit_code, 0);
  }

  void Set(const std::string& name, const std::string& key, const std::string& value) {
    RunResult set = daemon_.Ctl({"agent", "config", "set", name, key, value});
    ASSERT_EQ(set.exit_code, 0) << key << ": " << set.err;
  }

  Json Instance(const std::string& name) {
    std::optional<Json> doc = ParseJson(daemon_.Ctl({"agent", "show", name, "--json"}).out);
    return doc.has_value() ? (*doc)["instance"] : Json();
  }

  std::string Logs(const std::string& name) {
    return daemon_.Ctl({"agent", "logs", name, "--tail", "2000"}).out;
  }

  // The ledger equals the provider's reports, call for call (sums and count of unknowns).
  void ExpectLedgerEqualsProvider(const std::string& name, size_t min_calls) {
    uint64_t input = 0;
    uint64_t output = 0;
    long long unknown = 0;
    std::vector<FakeProvider::Call> calls;
    ASSERT_TRUE(WaitFor(
        [&] {
          calls = provider_->Calls();
          input = output = 0;
          unknown = 0;
          for (const FakeProvider::Call& call : calls) {
            input += call.input;
            output += call.output;
            unknown += call.reported ? 0 : 1;
          }
          const Json usage = Instance(name)["usage"];
          return calls.size() >= min_calls &&
                 usage["cumulative_input_tokens"].Int() == static_cast<long long>(input) &&
                 usage["cumulative_output_tokens"].Int() == static_cast<long long>(output) &&
                 usage["unknown_usage_calls"].Int() == unknown;
        },
        std::chrono::milliseconds(30000)))
        << "provider: " << calls.size() << " calls, " << input << "/" << output << ", " << unknown
        << " unknown; ledger: " << daemon_.Ctl({"agent", "usage", name, "--json"}).out << "\n"
        << Logs(name);
    EXPECT_GT(input, 0u);
    // The key reached the provider through the proxy but was never logged by the daemon.
    EXPECT_EQ(daemon_.DaemonLog().find(kApiKey), std::string::npos);
  }

  std::string bin_;
  TempDir provider_dir_;
  std::unique_ptr<FakeProvider> provider_;
  DaemonHarness daemon_;
};

TEST_F(RealAgentTest, CodexExecIsMeteredThroughTheProxy) {
  RunResult reg = daemon_.Ctl({"agent", "register", "codex", "--manifest", kExamples + "/codex"});
  ASSERT_EQ(reg.exit_code, 0) << reg.err;
  Set("codex", "metering.upstream_base_url", provider_->url() + "/v1");
  // The provider answers at once: a whole exec task may end within the 300 ms readiness window,
  // which the adapter's shim outlasts (examples/adapters/codex), so the run still ends `exited`.
  Set("codex", "agent.OPENAI_API_KEY", "secret:provider-key");
  Set("codex", "agent.CODEX_TASK", "Say hello.");
  RunResult start = daemon_.Ctl({"agent", "start", "codex"});
  ASSERT_EQ(start.exit_code, 0) << start.err << Logs("codex");
  // One exec task: Codex answers and exits 0.
  ASSERT_TRUE(WaitFor([&] { return Instance("codex")["state"].string == "stopped"; },
                      std::chrono::milliseconds(120000)))
      << Instance("codex")["state"].string << "\n"
      << Logs("codex");
  EXPECT_NE(Logs("codex").find("Hello, world"), std::string::npos) << Logs("codex");
  const std::string shown = daemon_.Ctl({"agent", "show", "codex"}).out;
  EXPECT_NE(shown.find("stopped (exited)"), std::string::npos) << shown;
  // The proxy URL (the agent's secret path) went to a file only its user reads, not to argv.
  const std::string config = Instance("codex")["agent_home"].string + "/codex/config.toml";
  struct stat info {};
  ASSERT_EQ(stat(config.c_str(), &info), 0) << config;
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_NE(ReadFileOrEmpty(config).find("base_url = \"http://127.0.0.1:"), std::string::npos)
      << ReadFileOrEmpty(config);
  EXPECT_NE(ReadFileOrEmpty(config).find("/kt-"), std::string::npos) << ReadFileOrEmpty(config);
  ExpectLedgerEqualsProvider("codex", 1);
  for (const FakeProvider::Call& call : provider_->Calls()) {
    EXPECT_EQ(call.path, "/responses");
  }
}

TEST_F(RealAgentTest, OpencodeServerIsMeteredThroughTheProxy) {
  RunResult reg =
      daemon_.Ctl({"agent", "register", "opencode", "--manifest", kExamples + "/opencode"});
  ASSERT_EQ(reg.exit_code, 0) << reg.err;
  const std::string home = Instance("opencode")["agent_home"].string;
  ASSERT_FALSE(home.empty());
  Set("opencode", "metering.upstream_base_url", provider_->url() + "/v1");
  Set("opencode", "agent.OPENAI_API_KEY", "secret:provider-key");
  Set("opencode", "agent.XDG_DATA_HOME", home + "/xdg/data");
  Set("opencode", "agent.XDG_CONFIG_HOME", home + "/xdg/config");
  Set("opencode", "agent.XDG_CACHE_HOME", home + "/xdg/cache");
  Set("opencode", "agent.XDG_STATE_HOME", home + "/xdg/state");
  Set("opencode", "agent.OPENCODE_CONFIG_CONTENT",
      R"({"autoupdate":false,"share":"disabled","model":"ktesio/fake-model",)"
      R"("provider":{"ktesio":{"npm":"@ai-sdk/openai-compatible","name":"ktesio",)"
      R"("options":{"baseURL":"{env:OPENAI_BASE_URL}","apiKey":"{env:OPENAI_API_KEY}"},)"
      R"("models":{"fake-model":{"name":"fake-model"}}}}})");
  RunResult start = daemon_.Ctl({"agent", "start", "opencode"});
  ASSERT_EQ(start.exit_code, 0) << start.err << Logs("opencode");
  // `opencode serve` announces its address on stdout.
  std::string server;
  const std::regex listening(R"(listening on (http://127\.0\.0\.1:[0-9]+))");
  ASSERT_TRUE(WaitFor(
      [&] {
        std::smatch match;
        const std::string logs = Logs("opencode");
        if (std::regex_search(logs, match, listening)) {
          server = match[1];
          return true;
        }
        return false;
      },
      std::chrono::milliseconds(60000)))
      << Logs("opencode");
  // A client asks the supervised server for one turn; the SERVER makes the model calls.
  TempDir client_home;
  RunOptions client;
  client.timeout = std::chrono::milliseconds(120000);
  client.extra_env = {"XDG_DATA_HOME=" + client_home.path(),
                      "XDG_CONFIG_HOME=" + client_home.path(),
                      "XDG_CACHE_HOME=" + client_home.path(),
                      "XDG_STATE_HOME=" + client_home.path(), "OPENCODE_DISABLE_AUTOUPDATE=1"};
  RunResult turn =
      RunProcess({bin_ + "/opencode", "run", "--attach", server, "Say hello."}, client);
  EXPECT_EQ(turn.exit_code, 0) << turn.out << turn.err << Logs("opencode");
  ExpectLedgerEqualsProvider("opencode", 1);
  for (const FakeProvider::Call& call : provider_->Calls()) {
    EXPECT_EQ(call.path, "/chat/completions");
  }
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "opencode"}).exit_code, 0);
}

}  // namespace
}  // namespace ktesio::testing
