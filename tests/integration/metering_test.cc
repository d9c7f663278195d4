// Engine-observed metering through the daemon: a stand-in agent that knows nothing about Ktesio
// calls the fake provider through its per-instance loopback proxy; the ledger equals what the
// provider reported, call for call, across a daemon crash; unknown usage is never zero;
// budgets act on proxied usage; a start without an upstream is refused before launch.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "daemon_harness.h"
#include "fake_provider.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

class MeteringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(provider_.ok());
    ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
  }

  void Register(const std::string& name) {
    const std::string dir = daemon_.dir() + "/m-" + name;
    std::filesystem::create_directories(dir);
    WriteFileOrDie(
        dir + "/adapter.toml",
        absl::StrCat("contract_version = \"1.0.0\"\n[adapter]\nkind = \"metered\"\n",
                     "[lifecycle.start]\nexec = \"/usr/bin/python3\"\nargs = [\"-u\", \"",
                     KTESIO_METERED_AGENT, "\"]\n",
                     // A proxy in the environment must not capture the loopback URL.
                     "env = { HTTP_PROXY = \"http://127.0.0.1:9\" }\n",
                     "[capabilities.pause]\nlinux = \"guaranteed\"\n",
                     "[capabilities.interaction]\nlinux = \"guaranteed\"\n",
                     "[metering]\nsource = \"engine-observed\"\n",
                     "[config.\"metering.base_url\"]\nenv = \"OPENAI_BASE_URL\"\n"));
    RunResult registered = daemon_.Ctl({"agent", "register", name, "--manifest", dir});
    ASSERT_EQ(registered.exit_code, 0) << registered.err;
  }

  void SetUpstream(const std::string& name, const std::string& url) {
    RunResult set =
        daemon_.Ctl({"agent", "config", "set", name, "metering.upstream_base_url", url});
    ASSERT_EQ(set.exit_code, 0) << set.err;
  }

  // Sends one call request to the agent and waits until it reports the call done.
  void Call(const std::string& name, const std::string& kind) {
    const size_t before = CountCalls(name);
    ASSERT_EQ(daemon_.Ctl({"agent", "send", name, kind}).exit_code, 0);
    ASSERT_TRUE(WaitFor([&] { return CountCalls(name) > before; })) << Logs(name);
  }

  size_t CountCalls(const std::string& name) {
    const std::string logs = Logs(name);
    size_t count = 0;
    for (size_t at = 0; (at = logs.find("CALL ", at)) != std::string::npos; ++at) {
      ++count;
    }
    return count;
  }

  // An engine-observed instance with a one-token run budget, started: its proxy's port and the
  // chat completions target under the agent's base URL.
  std::pair<uint16_t, std::string> StartWithOneTokenBudget(const std::string& name) {
    Register(name);
    SetUpstream(name, provider_.url() + "/v1");
    EXPECT_EQ(daemon_.Ctl({"agent", "config", "set", name, "budget.tokens.per_run", "1"}).exit_code,
              0);
    EXPECT_EQ(daemon_.Ctl({"agent", "start", name}).exit_code, 0);
    const std::string proxy_url = Instance(name)["proxy_url"].string;
    const auto port = static_cast<uint16_t>(std::stoi(proxy_url.substr(17)));
    return {port, proxy_url.substr(proxy_url.find('/', 17)) + "/v1/chat/completions"};
  }

  // The daemon is killed and started again: the paused instance's calls still get 429 and none
  // reaches the provider.
  void ExpectBlockedAfterADaemonRestart(const std::string& name, uint16_t port,
                                        const std::string& chat) {
    const size_t calls = provider_.Calls().size();
    daemon_.Kill();
    ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
    ASSERT_EQ(Instance(name)["state"].string, "paused");
    EXPECT_EQ(HttpRequest(port, "POST", chat, R"({"model":"m"})").status, 429);
    EXPECT_EQ(provider_.Calls().size(), calls) << "a call reached the provider after the restart";
  }

  std::string Logs(const std::string& name) {
    return daemon_.Ctl({"agent", "logs", name, "--tail", "1000"}).out;
  }

  Json Instance(const std::string& name) {
    std::optional<Json> doc = ParseJson(daemon_.Ctl({"agent", "show", name, "--json"}).out);
    return doc.has_value() ? (*doc)["instance"] : Json();
  }

  TempDir provider_dir_;
  FakeProvider provider_{provider_dir_.path()};
  DaemonHarness daemon_;
};

TEST_F(MeteringTest, StartWithoutUpstreamIsRefusedBeforeLaunchNamingTheKey) {
  Register("a");
  RunResult start = daemon_.Ctl({"agent", "start", "a"});
  EXPECT_NE(start.exit_code, 0);
  EXPECT_NE(start.err.find("metering.upstream_base_url"), std::string::npos) << start.err;
  EXPECT_EQ(Instance("a")["state"].string, "registered");
  EXPECT_EQ(Instance("a").Find("proxy_url"), nullptr);
}

TEST_F(MeteringTest, LedgerEqualsWhatTheProviderReportedCallForCall) {
  Register("a");
  SetUpstream("a", provider_.url() + "/v1");
  RunResult start = daemon_.Ctl({"agent", "start", "a"});
  ASSERT_EQ(start.exit_code, 0) << start.err;
  const Json instance = Instance("a");
  const std::string proxy_url = instance["proxy_url"].string;
  ASSERT_EQ(proxy_url.rfind("http://127.0.0.1:", 0), 0u) << proxy_url;
  // The agent got the proxy URL through its mapping, and NO_PROXY covering loopback.
  ASSERT_TRUE(WaitFor([&] { return Logs("a").find("BASE " + proxy_url) != std::string::npos; }))
      << Logs("a");
  EXPECT_NE(Logs("a").find("127.0.0.1,localhost,::1"), std::string::npos);
  // `config get` shows the injected URL, from the invocation-override layer.
  RunResult base = daemon_.Ctl({"agent", "config", "get", "a", "metering.base_url", "--json"});
  ASSERT_EQ(base.exit_code, 0) << base.out << base.err;
  EXPECT_NE(base.out.find("\"value\":\"" + proxy_url + "\""), std::string::npos) << base.out;
  EXPECT_NE(base.out.find("invocation-override"), std::string::npos) << base.out;

  for (const char* kind : {"chat", "chat-stream", "responses", "responses-stream", "anthropic",
                           "anthropic-stream", "no-usage", "chat-stream"}) {
    Call("a", kind);
  }
  EXPECT_EQ(Logs("a").find("failed"), std::string::npos) << Logs("a");
  uint64_t input = 0;
  uint64_t output = 0;
  size_t unknown = 0;
  for (const FakeProvider::Call& call : provider_.Calls()) {
    input += call.input;
    output += call.output;
    unknown += call.reported ? 0 : 1;
  }
  ASSERT_EQ(unknown, 1u);
  ASSERT_TRUE(WaitFor([&] {
    const Json usage = Instance("a")["usage"];
    return usage["cumulative_input_tokens"].Int() == static_cast<long long>(input) &&
           usage["unknown_usage_calls"].Int() == 1;
  })) << daemon_.Ctl({"agent", "usage", "a", "--json"}).out;
  const Json usage = Instance("a")["usage"];
  EXPECT_EQ(usage["cumulative_output_tokens"].Int(), static_cast<long long>(output));
  EXPECT_EQ(usage["current_run_input_tokens"].Int(), static_cast<long long>(input));
  EXPECT_EQ(Instance("a")["metering_source"].string, "engine-observed");
  // One usage_update per known call, stamped engine-observed.
  RunOptions briefly;
  briefly.timeout = std::chrono::milliseconds(1500);
  RunResult events = daemon_.Ctl({"events", "--since", "0", "--json"}, briefly);
  size_t updates = 0;
  for (size_t at = 0; (at = events.out.find("\"metering_source\":\"engine-observed\",\"sequence\"",
                                            at)) != std::string::npos;
       ++at) {
    ++updates;
  }
  EXPECT_EQ(updates, 7u) << events.out;
  // The unknown call is visible in the agent's engine log, never as zero tokens.
  EXPECT_NE(daemon_.Ctl({"agent", "logs", "a", "--stream", "engine"})
                .out.find("counted as unknown, not as zero tokens"),
            std::string::npos);
  // Keys never reach the daemon log.
  EXPECT_EQ(daemon_.DaemonLog().find("sk-agent-key"), std::string::npos);

  // Stopping the agent closes its listener.
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "a", "--timeout", "0"}).exit_code, 0);
  EXPECT_EQ(Instance("a").Find("proxy_url"), nullptr);
  EXPECT_EQ(daemon_.Ctl({"agent", "config", "get", "a", "metering.base_url"}).exit_code, 3);
  const uint16_t port = static_cast<uint16_t>(std::stoi(proxy_url.substr(17)));
  EXPECT_EQ(HttpRequest(port, "GET", "/v1/models").status, 0);
}

TEST_F(MeteringTest, ProxyComesBackOnTheSamePortAfterADaemonCrash) {
  Register("a");
  SetUpstream("a", provider_.url() + "/v1");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "a"}).exit_code, 0);
  const std::string proxy_url = Instance("a")["proxy_url"].string;
  Call("a", "chat");
  daemon_.Kill();
  ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
  EXPECT_EQ(Instance("a")["state"].string, "running");
  EXPECT_EQ(Instance("a")["proxy_url"].string, proxy_url);
  Call("a", "chat-stream");  // the same agent process, the same base URL
  EXPECT_EQ(Logs("a").find("failed"), std::string::npos) << Logs("a");
  uint64_t input = 0;
  for (const FakeProvider::Call& call : provider_.Calls()) {
    input += call.input;
  }
  ASSERT_EQ(provider_.Calls().size(), 2u);
  EXPECT_TRUE(WaitFor([&] {
    return Instance("a")["usage"]["cumulative_input_tokens"].Int() == static_cast<long long>(input);
  }));
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "a", "--timeout", "0"}).exit_code, 0);
}

// The port taken while the daemon was down: the re-adopted agent's calls would go to whoever
// holds it, so the daemon says so (degraded, naming the instance) until the agent restarts.
TEST_F(MeteringTest, AProxyPortTakenMeanwhileIsReportedUntilTheAgentRestarts) {
  Register("a");
  SetUpstream("a", provider_.url() + "/v1");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "a"}).exit_code, 0);
  const std::string proxy_url = Instance("a")["proxy_url"].string;
  const auto port = static_cast<uint16_t>(std::stoi(proxy_url.substr(17)));
  daemon_.Kill();
  const int squatter = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(squatter, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(squatter, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0)
      << std::strerror(errno);
  ASSERT_EQ(listen(squatter, 4), 0);
  ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
  auto problems = [&] {
    std::optional<Json> doc = ParseJson(daemon_.Ctl({"daemon", "status", "--json"}).out);
    std::string all;
    if (doc.has_value()) {
      for (const Json& problem : (*doc)["problems"].array) {
        all += problem.string + "\n";
      }
    }
    return all;
  };
  const std::string reported = problems();
  EXPECT_NE(reported.find("the metering proxy of 'a' could not be re-opened"), std::string::npos)
      << reported;
  EXPECT_NE(reported.find("ktctl agent restart a"), std::string::npos) << reported;
  EXPECT_NE(Logs("a").find("metering proxy could not be re-opened"), std::string::npos);
  ASSERT_EQ(daemon_.Ctl({"agent", "restart", "a"}).exit_code, 0);
  EXPECT_EQ(problems(), "") << "still reported after the restart";
  EXPECT_NE(Instance("a")["proxy_url"].string, proxy_url) << "a new port";
  close(squatter);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "a", "--timeout", "0"}).exit_code, 0);
}

TEST_F(MeteringTest, TokenBudgetStopsAnEngineObservedAgent) {
  Register("a");
  SetUpstream("a", provider_.url() + "/v1");
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "a", "budget.tokens.per_run", "1"}).exit_code,
            0);
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "a", "budget.breach_action", "stop"}).exit_code,
            0);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "a"}).exit_code, 0);
  // The stop may land before the agent prints its CALL line: wait for the state only.
  ASSERT_EQ(daemon_.Ctl({"agent", "send", "a", "chat"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return Instance("a")["state"].string == "stopped"; }))
      << Instance("a")["state"].string;
  RunOptions briefly;
  briefly.timeout = std::chrono::milliseconds(1500);
  RunResult events = daemon_.Ctl({"events", "--since", "0", "--json"}, briefly);
  EXPECT_NE(events.out.find("\"cause\":\"budget-exceeded{scope=run,dimension=tokens,limit=1,"),
            std::string::npos)
      << events.out;
  EXPECT_NE(events.out.find("\"type\":\"budget_breach\""), std::string::npos);
  EXPECT_NE(events.out.find("\"metering_source\":\"engine-observed\",\"at\""), std::string::npos);
}

TEST_F(MeteringTest, BudgetPauseRefusesFurtherModelCallsUntilResumed) {
  const std::pair<uint16_t, std::string> proxy = StartWithOneTokenBudget("a");
  const uint16_t port = proxy.first;
  const std::string& chat = proxy.second;
  ASSERT_EQ(daemon_.Ctl({"agent", "send", "a", "chat"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return Instance("a")["state"].string == "paused"; }));
  // Whatever the pause achieves, no further model call reaches the provider.
  ASSERT_TRUE(
      WaitFor([&] { return HttpRequest(port, "POST", chat, R"({"model":"m"})").status == 429; }));
  EXPECT_EQ(provider_.Calls().size(), 1u);
  // The block outlives the daemon: a restarted one keeps refusing until the operator resumes.
  ExpectBlockedAfterADaemonRestart("a", port, chat);
  ASSERT_EQ(daemon_.Ctl({"agent", "resume", "a"}).exit_code, 0);
  EXPECT_TRUE(
      WaitFor([&] { return HttpRequest(port, "POST", chat, R"({"model":"m"})").status == 200; }));
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "a", "--timeout", "0"}).exit_code, 0);
}

// A breach made while the operator had the agent paused keeps its cause `paused`: the block on
// its model calls is restored from the breach record after a daemon restart all the same.
TEST_F(MeteringTest, ABreachWhileOperatorPausedStaysBlockedAcrossADaemonRestart) {
  const std::pair<uint16_t, std::string> proxy = StartWithOneTokenBudget("a");
  const uint16_t port = proxy.first;
  const std::string& chat = proxy.second;
  ASSERT_EQ(daemon_.Ctl({"agent", "pause", "a"}).exit_code, 0);
  // A call through the paused agent's URL (another process of the agent, say) crosses the limit.
  ASSERT_EQ(HttpRequest(port, "POST", chat, R"({"model":"m"})").status, 200);
  ASSERT_TRUE(
      WaitFor([&] { return HttpRequest(port, "POST", chat, R"({"model":"m"})").status == 429; }));
  ExpectBlockedAfterADaemonRestart("a", port, chat);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "a", "--timeout", "0"}).exit_code, 0);
}

TEST_F(MeteringTest, OnlyTheAgentsBaseUrlIsServed) {
  Register("a");
  SetUpstream("a", provider_.url() + "/v1");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "a"}).exit_code, 0);
  const std::string proxy_url = Instance("a")["proxy_url"].string;
  ASSERT_NE(proxy_url.find("/kt-"), std::string::npos) << proxy_url;
  const uint16_t port = static_cast<uint16_t>(std::stoi(proxy_url.substr(17)));
  const std::string prefix = proxy_url.substr(proxy_url.find('/', 17));
  // Another local process that knows only the port: refused, not forwarded, not metered.
  for (const std::string& target :
       {std::string("/v1/chat/completions"), std::string("/kt-0000/v1/chat/completions"),
        prefix + "x/v1/chat/completions"}) {
    EXPECT_EQ(HttpRequest(port, "POST", target, R"({"model":"m"})").status, 403u) << target;
  }
  // A stranger is answered on the head: no 100 Continue, no body read (up to 32 MiB held per
  // connection for minutes before), and 403 whatever length it declares.
  for (const char* length : {"30000000", "40000000"}) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    const std::string head = std::string("POST /kt-0000/v1/chat/completions HTTP/1.1\r\nHost: ") +
                             "x\r\nContent-Length: " + length + "\r\nExpect: 100-continue\r\n\r\n";
    ASSERT_EQ(write(fd, head.data(), head.size()), static_cast<ssize_t>(head.size()));
    timeval wait{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
    std::string reply;
    char chunk[4096];
    for (ssize_t n; (n = read(fd, chunk, sizeof(chunk))) > 0;) {
      reply.append(chunk, static_cast<size_t>(n));
    }
    close(fd);
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 403 Forbidden\r\n")) << reply;
    EXPECT_EQ(reply.find("100 Continue"), std::string::npos) << reply;
  }
  // Not a tunnel, even for the agent: CONNECT under the prefix is refused, not forwarded.
  const HttpResponse connect = HttpRequest(port, "CONNECT", prefix + "/v1", "");
  EXPECT_EQ(connect.status, 405u);
  EXPECT_NE(connect.body.find(R"("type":"method_not_allowed")"), std::string::npos) << connect.body;
  EXPECT_EQ(provider_.Calls().size(), 0u);
  EXPECT_EQ(HttpRequest(port, "POST", prefix + "/v1/chat/completions", R"({"model":"m"})").status,
            200u);
  EXPECT_EQ(provider_.Calls().size(), 1u);
  // The path survives a daemon crash (the re-adopted agent's URL keeps working).
  daemon_.Kill();
  ASSERT_TRUE(daemon_.Start()) << daemon_.DaemonLog();
  EXPECT_EQ(Instance("a")["proxy_url"].string, proxy_url);
  EXPECT_EQ(HttpRequest(port, "POST", prefix + "/v1/chat/completions", R"({"model":"m"})").status,
            200u);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "a", "--timeout", "0"}).exit_code, 0);
}

// A local process opening far more idle connections than the daemon has descriptors (scaled
// down: the daemon runs with 1024): the API keeps answering, the agent restarts, the log stays
// bounded, and the proxy serves again once the flood is over.
TEST_F(MeteringTest, AConnectionFloodCannotSilenceTheDaemon) {
  ASSERT_EQ(daemon_.Stop(), 0);
  const std::string wrapper = daemon_.dir() + "/ktesiod-1024";
  WriteFileOrDie(wrapper, "#!/bin/sh\nulimit -n 1024\nexec " + KtesiodPath() + " \"$@\"\n");
  chmod(wrapper.c_str(), 0755);
  const std::string config = daemon_.dir() + "/ktesiod.toml";
  WriteFileOrDie(config, "metering_header_timeout_secs = 2\n");
  daemon_.set_binary(wrapper);
  ASSERT_TRUE(daemon_.Start({"--config", config})) << daemon_.DaemonLog();
  Register("a");
  SetUpstream("a", provider_.url() + "/v1");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "a"}).exit_code, 0);
  const std::string proxy_url = Instance("a")["proxy_url"].string;
  const uint16_t port = static_cast<uint16_t>(std::stoi(proxy_url.substr(17)));

  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  std::vector<int> flood;
  const char partial[] = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 3000; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0) << "the test itself ran out of descriptors at " << i;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      (void)!write(fd, partial, sizeof(partial) - 1);
    }
    flood.push_back(fd);
  }
  // While the flood holds: the API answers within its deadline and says what is happening. The
  // connections above complete in the kernel's backlog; the proxy accepts (and refuses) them on
  // its own thread, so the report may take a moment (longer under ASan) to appear.
  RunResult status;
  EXPECT_TRUE(WaitFor([&] {
    status = daemon_.Ctl({"--timeout", "5", "daemon", "status"});
    EXPECT_EQ(status.exit_code, 0) << status.err;
    return status.exit_code != 0 ||
           status.out.find("metering proxy under a connection flood") != std::string::npos;
  })) << status.out;
  EXPECT_NE(status.out.find("metering proxy under a connection flood"), std::string::npos)
      << status.out;
  RunResult restart = daemon_.Ctl({"--timeout", "20", "agent", "restart", "a", "--timeout", "0"});
  EXPECT_EQ(restart.exit_code, 0) << restart.out << restart.err;
  for (int fd : flood) {
    close(fd);
  }
  // Afterwards the proxy serves again (at the same URL: the restart kept the port).
  const std::string url = Instance("a")["proxy_url"].string;
  const uint16_t new_port = static_cast<uint16_t>(std::stoi(url.substr(17)));
  const std::string chat = url.substr(url.find('/', 17)) + "/v1/chat/completions";
  EXPECT_TRUE(WaitFor(
      [&] { return HttpRequest(new_port, "POST", chat, R"({"model":"m"})").status == 200; }));
  // The refusals held back after the first report are summed up when the interval ends, even
  // though nothing is refused after the flood.
  EXPECT_TRUE(
      WaitFor([&] { return daemon_.DaemonLog().find(" in the last 10 s") != std::string::npos; },
              std::chrono::seconds(20)))
      << daemon_.DaemonLog().substr(0, 4000);
  // The log stayed bounded: one summary line per 10 s, not one per refused connection.
  const std::string log = daemon_.DaemonLog();
  size_t lines = 0;
  for (size_t at = 0; (at = log.find("metering proxy: refused", at)) != std::string::npos; ++at) {
    ++lines;
  }
  EXPECT_GE(lines, 1u) << log.substr(0, 4000);
  EXPECT_LE(lines, 5u);
  EXPECT_LT(log.size(), 200000u);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "a", "--timeout", "0"}).exit_code, 0);
}

// 1xx responses are interim: the agent gets the final response of each call (each call's own:
// a 100 taken as final answered the call with nothing and shifted every later response by one).
TEST_F(MeteringTest, InterimResponsesFromTheProviderAreDropped) {
  Register("a");
  SetUpstream("a", provider_.url() + "/v1");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "a"}).exit_code, 0);
  const std::string url = Instance("a")["proxy_url"].string;
  const uint16_t port = static_cast<uint16_t>(std::stoi(url.substr(17)));
  const std::string chat = url.substr(url.find('/', 17)) + "/v1/chat/completions";
  for (int call = 0; call < 2; ++call) {
    HttpResponse r = HttpRequest(port, "POST", chat, R"({"model":"interim"})");
    EXPECT_EQ(r.status, 200) << r.error;
    EXPECT_NE(r.body.find("chat.completion"), std::string::npos) << r.body;
  }
  EXPECT_EQ(provider_.Calls().size(), 2u);
  // An upgrade the proxy never asked for is a broken response: 502, counted.
  EXPECT_EQ(HttpRequest(port, "POST", chat, R"({"model":"upgrade"})").status, 502);
  EXPECT_EQ(HttpRequest(port, "POST", chat, R"({"model":"m"})").status, 200);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "a", "--timeout", "0"}).exit_code, 0);
}

TEST_F(MeteringTest, UnreachableUpstreamGivesTheAgentAnHonest502) {
  Register("a");
  SetUpstream("a", "http://127.0.0.1:9/v1");  // discard port: nothing listens
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "a"}).exit_code, 0);
  Call("a", "chat");
  EXPECT_NE(Logs("a").find("CALL chat failed HTTP Error 502"), std::string::npos) << Logs("a");
  EXPECT_EQ(Instance("a")["usage"]["unknown_usage_calls"].Int(), 0) << "no call reached a model";
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "a", "--timeout", "0"}).exit_code, 0);
}

// The policy of the daemon's thread named `name` (sched_getscheduler), -1 when it has none.
int ThreadPolicy(pid_t pid, const std::string& name) {
  const std::string tasks = absl::StrCat("/proc/", pid, "/task");
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    const std::string comm = ReadFileOrEmpty(task.path().string() + "/comm");
    if (comm == name + "\n") {
      return sched_getscheduler(static_cast<pid_t>(std::stoi(task.path().filename().string())));
    }
  }
  return -1;
}

// The proxy thread gives up wake-up preemption (SCHED_BATCH, never inherited by what it might
// start) unless the operator asks for the daemon's own policy; the engine thread keeps it. Each
// thread names itself and sets its policy once it runs, which may be after the daemon is ready:
// waited for (under ASan it was not there yet).
TEST_F(MeteringTest, TheProxyThreadRunsUnderBatchSchedulingUnlessConfiguredNormal) {
  const auto proxy_policy = [&] { return ThreadPolicy(daemon_.pid(), "kt-proxy"); };
  EXPECT_TRUE(WaitFor([&] { return proxy_policy() == (SCHED_BATCH | SCHED_RESET_ON_FORK); }))
      << proxy_policy();
  EXPECT_TRUE(WaitFor([&] { return ThreadPolicy(daemon_.pid(), "kt-engine") == SCHED_OTHER; }))
      << ThreadPolicy(daemon_.pid(), "kt-engine");
  ASSERT_EQ(daemon_.Stop(), 0);
  const std::string config = daemon_.dir() + "/ktesiod.toml";
  WriteFileOrDie(config, "metering_relay_scheduling = \"normal\"\n");
  ASSERT_TRUE(daemon_.Start({"--config", config})) << daemon_.DaemonLog();
  // The proxy still serves under either policy; once it has served, its thread is set up.
  Register("a");
  SetUpstream("a", provider_.url() + "/v1");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "a"}).exit_code, 0);
  Call("a", "chat");
  EXPECT_EQ(provider_.Calls().size(), 1u);
  EXPECT_EQ(proxy_policy(), SCHED_OTHER);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "a", "--timeout", "0"}).exit_code, 0);
}

}  // namespace
}  // namespace ktesio::testing
