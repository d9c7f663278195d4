// The Prometheus metrics endpoint of the real daemon: off by default; on a loopback port, a unix
// socket or (with a warning) any address; /metrics, /healthz and 404 for the rest; the figures
// equal what `ktctl` shows (ledger counters continue across a daemon SIGKILL); per-agent CPU and
// memory of the process tree; a removed instance's series disappear; promtool accepts the text.

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon_harness.h"
#include "fake_provider.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

// The value of the sample `series` (name plus labels, exactly as exposed), or "" when absent.
std::string SampleValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) {
      return line.substr(series.size() + 1);
    }
  }
  return "";
}

double Number(const std::string& text, const std::string& series) {
  double value = -1;
  std::string raw = SampleValue(text, series);
  return raw.empty() || !absl::SimpleAtod(raw, &value) ? -1 : value;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(provider_.ok());
    ASSERT_TRUE(daemon_.Start({"--metrics-listen", "127.0.0.1:0"})) << daemon_.DaemonLog();
  }

  std::string MetricsAddress() {
    std::optional<Json> doc = ParseJson(daemon_.Ctl({"daemon", "status", "--json"}).out);
    return doc.has_value() ? (*doc)["metrics_address"].string : "";
  }

  uint16_t Port() {
    const std::string address = MetricsAddress();
    uint32_t port = 0;
    EXPECT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) << address;
    return static_cast<uint16_t>(port);
  }

  std::string Scrape() {
    HttpResponse response = HttpRequest(Port(), "GET", "/metrics");
    EXPECT_EQ(response.status, 200) << response.error << response.body;
    return response.body;
  }

  void RegisterSelfReported(const std::string& name, const std::string& args) {
    const std::string dir = WriteProbeManifest(daemon_.dir() + "/m-" + name, "usage", args);
    RunResult registered = daemon_.Ctl({"agent", "register", name, "--manifest", dir});
    ASSERT_EQ(registered.exit_code, 0) << registered.err;
  }

  void RegisterObserved(const std::string& name) {
    const std::string dir = daemon_.dir() + "/m-" + name;
    std::filesystem::create_directories(dir);
    WriteFileOrDie(
        dir + "/adapter.toml",
        absl::StrCat("contract_version = \"1.0.0\"\n[adapter]\nkind = \"metered\"\n",
                     "[lifecycle.start]\nexec = \"/usr/bin/python3\"\nargs = [\"-u\", \"",
                     KTESIO_METERED_AGENT, "\"]\n",
                     "env = { HTTP_PROXY = \"http://127.0.0.1:9\" }\n",
                     "[capabilities.interaction]\nlinux = \"guaranteed\"\n",
                     "[metering]\nsource = \"engine-observed\"\n",
                     "[config.\"metering.base_url\"]\nenv = \"OPENAI_BASE_URL\"\n"));
    ASSERT_EQ(daemon_.Ctl({"agent", "register", name, "--manifest", dir}).exit_code, 0);
    ASSERT_EQ(daemon_
                  .Ctl({"agent", "config", "set", name, "metering.upstream_base_url",
                        provider_.url() + "/v1"})
                  .exit_code,
              0);
  }

  Json Usage(const std::string& name) {
    std::optional<Json> doc = ParseJson(daemon_.Ctl({"agent", "usage", name, "--json"}).out);
    return doc.has_value() ? (*doc)["usage"] : Json();
  }

  TempDir provider_dir_;
  FakeProvider provider_{provider_dir_.path()};
  DaemonHarness daemon_;
};

TEST(MetricsOff, NoEndpointByDefault) {
  DaemonHarness daemon;
  ASSERT_TRUE(daemon.Start());
  std::optional<Json> doc = ParseJson(daemon.Ctl({"daemon", "status", "--json"}).out);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->Find("metrics_address"), nullptr);
  EXPECT_EQ(daemon.DaemonLog().find("metrics endpoint"), std::string::npos);
}

TEST_F(MetricsTest, ServesMetricsHealthzAndNothingElse) {
  HttpResponse metrics = HttpRequest(Port(), "GET", "/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.error;
  EXPECT_EQ(metrics.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(SampleValue(metrics.body,
                        "ktesio_build_info{version=\"0.1.0\",api_version=\"1.0.0\","
                        "contract_version=\"1.0.0\"}"),
            "1")
      << metrics.body;
  for (const char* state :
       {"registered", "starting", "running", "paused", "stopping", "stopped", "failed"}) {
    EXPECT_EQ(SampleValue(metrics.body, absl::StrCat("ktesio_agents{state=\"", state, "\"}")), "0")
        << state;
  }
  EXPECT_GT(Number(metrics.body, "ktesio_daemon_start_time_seconds"), 1.7e9);
  EXPECT_GT(Number(metrics.body, "process_open_fds"), 3);
  EXPECT_GT(Number(metrics.body, "process_resident_memory_bytes"), 1e6);
  // The status call above was counted.
  EXPECT_GE(
      Number(metrics.body,
             "ktesio_api_requests_total{rpc=\"ktesio.v1.SystemService/GetStatus\",code=\"OK\"}"),
      1);

  HttpResponse health = HttpRequest(Port(), "GET", "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  EXPECT_EQ(HttpRequest(Port(), "GET", "/").status, 404);
  EXPECT_EQ(HttpRequest(Port(), "GET", "/metrics/x").status, 404);
  // No mutating endpoint, and no body is read.
  EXPECT_EQ(HttpRequest(Port(), "POST", "/metrics", "x=1").status, 404);
  EXPECT_EQ(HttpRequest(Port(), "DELETE", "/healthz").status, 404);
  // An oversized request head gets 431, a malformed one 400; the endpoint keeps serving.
  HttpResponse huge =
      HttpRequest(Port(), "GET", "/metrics", "", {"X-Big: " + std::string(20000, 'a')});
  EXPECT_EQ(huge.status, 431);
  EXPECT_EQ(HttpRequest(Port(), "GET", "/metrics", "", {"Bad Header Without Colon"}).status, 400);
  // A flood of scrapes is served (scrapes within 200 ms share one engine read).
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(HttpRequest(Port(), "GET", "/metrics").status, 200) << i;
  }
  EXPECT_EQ(HttpRequest(Port(), "GET", "/healthz").status, 200);

  RunResult text = daemon_.Ctl({"daemon", "status"});
  EXPECT_NE(text.out.find("metrics:    " + MetricsAddress() + " (GET /metrics)"), std::string::npos)
      << text.out;
  EXPECT_NE(daemon_.DaemonLog().find("metrics endpoint listening on 127.0.0.1:"),
            std::string::npos);
}

TEST_F(MetricsTest, PromtoolAcceptsTheExposition) {
  const std::string promtool = "/usr/bin/promtool";
  if (access(promtool.c_str(), X_OK) != 0) {
    GTEST_SKIP() << "promtool not installed (Debian package prometheus; scripts/install-deps.sh)";
  }
  RegisterSelfReported("s", "--usage-lines 3 --heartbeat-ms 60000");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "s"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "s", "budget.tokens.per_run", "1000"}).exit_code,
            0);
  RunOptions options;
  options.stdin_text = Scrape();
  RunResult check = RunProcess({promtool, "check", "metrics"}, options);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err << options.stdin_text;
  EXPECT_EQ(check.out + check.err, "") << "promtool lint findings";
}

TEST_F(MetricsTest, FiguresEqualTheCliAndContinueAcrossADaemonCrash) {
  RegisterSelfReported("s",
                       "--usage-lines 30 --usage-input 7 --usage-output 11 --heartbeat-ms 60000");
  RegisterObserved("e");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "s"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "e"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "send", "e", "chat"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "send", "e", "no-usage"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] {
    return Usage("s")["cumulative_input_tokens"].Int() == 210 &&
           Usage("e")["unknown_usage_calls"].Int() == 1 &&
           Usage("e")["cumulative_input_tokens"].Int() > 0;
  })) << daemon_.Ctl({"agent", "list", "--json"}).out;

  std::string text = Scrape();
  EXPECT_EQ(SampleValue(text, "ktesio_agent_tokens_total{agent=\"s\",direction=\"input\"}"), "210");
  EXPECT_EQ(SampleValue(text, "ktesio_agent_tokens_total{agent=\"s\",direction=\"output\"}"),
            "330");
  const Json e = Usage("e");
  EXPECT_EQ(SampleValue(text, "ktesio_agent_tokens_total{agent=\"e\",direction=\"input\"}"),
            std::to_string(e["cumulative_input_tokens"].Int()));
  EXPECT_EQ(SampleValue(text, "ktesio_agent_tokens_total{agent=\"e\",direction=\"output\"}"),
            std::to_string(e["cumulative_output_tokens"].Int()));
  EXPECT_EQ(SampleValue(text, "ktesio_agent_model_calls_total{agent=\"e\",usage=\"known\"}"), "1");
  EXPECT_EQ(SampleValue(text, "ktesio_agent_model_calls_total{agent=\"e\",usage=\"unknown\"}"),
            "1");
  // Self-reported instances have no proxied calls to count.
  EXPECT_EQ(SampleValue(text, "ktesio_agent_model_calls_total{agent=\"s\",usage=\"known\"}"), "");
  EXPECT_EQ(SampleValue(text,
                        "ktesio_agent_info{agent=\"s\",kind=\"usage\",metering_source=\"self-"
                        "reported\"}"),
            "1");
  EXPECT_EQ(SampleValue(text,
                        "ktesio_agent_info{agent=\"e\",kind=\"metered\",metering_source="
                        "\"engine-observed\"}"),
            "1");
  EXPECT_EQ(SampleValue(text, "ktesio_agent_state{agent=\"s\",state=\"running\"}"), "1");
  EXPECT_EQ(SampleValue(text, "ktesio_agent_state{agent=\"s\",state=\"stopped\"}"), "0");
  EXPECT_EQ(SampleValue(text, "ktesio_agents{state=\"running\"}"), "2");
  EXPECT_EQ(SampleValue(text, "ktesio_agent_restarts_total{agent=\"s\"}"), "0");
  // The process trees: the probe alone, the python agent alone.
  EXPECT_GT(Number(text, "ktesio_agent_resident_memory_bytes{agent=\"s\"}"), 100000);
  EXPECT_GT(Number(text, "ktesio_agent_resident_memory_bytes{agent=\"e\"}"), 1000000);
  EXPECT_GE(Number(text, "ktesio_agent_cpu_seconds_total{agent=\"e\"}"), 0);
  // Both calls were relayed: two observations of the time the proxy added.
  EXPECT_EQ(SampleValue(text, "ktesio_proxy_request_duration_seconds_count{agent=\"e\"}"), "2");
  EXPECT_EQ(
      SampleValue(text, "ktesio_proxy_request_duration_seconds_bucket{agent=\"e\",le=\"+Inf\"}"),
      "2");
  EXPECT_GT(Number(text, "ktesio_proxy_request_duration_seconds_sum{agent=\"e\"}"), 0);
  EXPECT_EQ(text.find("ktesio_proxy_request_duration_seconds_count{agent=\"s\"}"),
            std::string::npos);
  EXPECT_GE(Number(text, "ktesio_events_total{type=\"transition\"}"), 4);
  EXPECT_GE(Number(text, "ktesio_events_total{type=\"usage_update\"}"), 2);
  EXPECT_GE(Number(text,
                   "ktesio_api_requests_total{rpc=\"ktesio.v1.AgentService/StartAgent\","
                   "code=\"OK\"}"),
            2);
  const double transitions = Number(text, "ktesio_events_total{type=\"transition\"}");

  // The same figures through the API: agent show has the tree's resources.
  std::optional<Json> show = ParseJson(daemon_.Ctl({"agent", "show", "s", "--json"}).out);
  ASSERT_TRUE(show.has_value());
  const Json& resources = (*show)["instance"]["resources"];
  EXPECT_GT(resources["resident_memory_bytes"].Int(), 100000);
  EXPECT_EQ(resources["processes"].Int(), 1);
  EXPECT_TRUE(resources["cpu_ms"].IsInteger());
  EXPECT_NE(daemon_.Ctl({"agent", "show", "s"}).out.find("memory (rss):"), std::string::npos);

  // A daemon crash: the ledger counters continue (no reset for rate() to misread).
  daemon_.Kill();
  ASSERT_TRUE(daemon_.Start({"--metrics-listen", "127.0.0.1:0"})) << daemon_.DaemonLog();
  text = Scrape();
  EXPECT_EQ(SampleValue(text, "ktesio_agent_tokens_total{agent=\"s\",direction=\"input\"}"), "210");
  EXPECT_EQ(SampleValue(text, "ktesio_agent_model_calls_total{agent=\"e\",usage=\"known\"}"), "1");
  EXPECT_GE(Number(text, "ktesio_events_total{type=\"transition\"}"), transitions);
  EXPECT_EQ(SampleValue(text, "ktesio_agent_state{agent=\"s\",state=\"running\"}"), "1");

  // A removed instance's series disappear (scrapes within 200 ms share one rendering: wait).
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "s"}).exit_code, 0);
  EXPECT_TRUE(WaitFor([&] {
    return SampleValue(Scrape(), "ktesio_agent_resident_memory_bytes{agent=\"s\"}").empty();
  }));
  ASSERT_EQ(daemon_.Ctl({"agent", "remove", "s"}).exit_code, 0);
  EXPECT_TRUE(WaitFor([&] { return Scrape().find("agent=\"s\"") == std::string::npos; }));
  EXPECT_NE(Scrape().find("agent=\"e\""), std::string::npos);
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "e"}).exit_code, 0);
}

// ktesio_agent_restarts_total is a counter: an operator stop and start resets the restart_count
// of agent list, but the counter keeps growing, also across a daemon crash.
TEST_F(MetricsTest, TheRestartCounterNeverGoesBackwards) {
  RegisterSelfReported("r", "--heartbeat-ms 60000");
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "r"}).exit_code, 0);
  auto show = [&] {
    std::optional<Json> shown = ParseJson(daemon_.Ctl({"agent", "show", "r", "--json"}).out);
    return shown.has_value() ? (*shown)["instance"] : Json();
  };
  const int64_t first = show()["pid"].Int();
  ASSERT_GT(first, 0);
  ASSERT_EQ(kill(static_cast<pid_t>(first), SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] {
    const Json now = show();
    return now["restart_count"].Int() == 1 && now["state"].string == "running";
  })) << daemon_.Ctl({"agent", "show", "r"}).out;
  EXPECT_EQ(SampleValue(Scrape(), "ktesio_agent_restarts_total{agent=\"r\"}"), "1");

  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "r"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "r"}).exit_code, 0);
  EXPECT_EQ(show()["restart_count"].Int(), 0) << "an operator start resets the restart count";
  EXPECT_TRUE(WaitFor([&] {
    return SampleValue(Scrape(), "ktesio_agent_restarts_total{agent=\"r\"}") == "1";
  })) << Scrape();

  daemon_.Kill();
  ASSERT_TRUE(daemon_.Start({"--metrics-listen", "127.0.0.1:0"})) << daemon_.DaemonLog();
  EXPECT_EQ(SampleValue(Scrape(), "ktesio_agent_restarts_total{agent=\"r\"}"), "1");
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "r"}).exit_code, 0);
}

TEST_F(MetricsTest, UpstreamErrorsAreCountedByReason) {
  RegisterObserved("x");
  ASSERT_EQ(daemon_
                .Ctl({"agent", "config", "set", "x", "metering.upstream_base_url",
                      "http://127.0.0.1:9/v1"})  // discard port: nothing listens
                .exit_code,
            0);
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "x"}).exit_code, 0);
  ASSERT_EQ(daemon_.Ctl({"agent", "send", "x", "chat"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] {
    return SampleValue(Scrape(),
                       "ktesio_proxy_upstream_errors_total{agent=\"x\",reason=\"connect\"}") == "1";
  })) << Scrape();
  // Nothing was relayed, so nothing was observed.
  EXPECT_EQ(SampleValue(Scrape(), "ktesio_proxy_request_duration_seconds_count{agent=\"x\"}"), "0");
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "x", "--timeout", "0"}).exit_code, 0);
}

TEST_F(MetricsTest, BudgetsAndBreaches) {
  RegisterSelfReported("b",
                       "--usage-lines 5 --usage-input 10 --usage-output 10 --heartbeat-ms 60000");
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"budget.tokens.per_run", "60"},
                                                        {"budget.breach_action", "warn"},
                                                        {"cost.rate.input", "2"},
                                                        {"cost.rate.output", "4"},
                                                        {"budget.dollars.cumulative", "1"}}) {
    ASSERT_EQ(daemon_.Ctl({"agent", "config", "set", "b", key, value}).exit_code, 0) << key;
  }
  ASSERT_EQ(daemon_.Ctl({"agent", "start", "b"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return Usage("b")["cumulative_input_tokens"].Int() == 50; }));
  const std::string text = Scrape();
  EXPECT_EQ(SampleValue(
                text, "ktesio_agent_budget_limit{agent=\"b\",scope=\"run\",dimension=\"tokens\"}"),
            "60");
  EXPECT_EQ(SampleValue(text,
                        "ktesio_agent_budget_remaining{agent=\"b\",scope=\"run\",dimension="
                        "\"tokens\"}"),
            "0");
  EXPECT_EQ(SampleValue(text,
                        "ktesio_agent_budget_limit{agent=\"b\",scope=\"cumulative\","
                        "dimension=\"dollars\"}"),
            "1");
  // 50 input tokens at $2/M + 50 output at $4/M = $0.0003.
  EXPECT_EQ(SampleValue(text, "ktesio_agent_spend_dollars_total{agent=\"b\"}"), "0.0003");
  EXPECT_EQ(SampleValue(text,
                        "ktesio_agent_budget_remaining{agent=\"b\",scope=\"cumulative\","
                        "dimension=\"dollars\"}"),
            "0.9997");
  EXPECT_EQ(SampleValue(text, "ktesio_agent_budget_breaches_total{agent=\"b\",action=\"warn\"}"),
            "1");
  ASSERT_EQ(daemon_.Ctl({"agent", "stop", "b"}).exit_code, 0);
}

// One GET over a unix socket; returns the raw response.
std::string UnixGet(const std::string& path, const std::string& target) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  std::string raw;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request =
        "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[65536];
      for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) {
        raw.append(buffer, static_cast<size_t>(n));
      }
    }
  }
  close(fd);
  return raw;
}

TEST(MetricsListen, UnixSocketConfigFileAndBadAddresses) {
  DaemonHarness daemon;
  const std::string path = daemon.dir() + "/metrics.sock";
  WriteFileOrDie(daemon.dir() + "/ktesiod.toml", "metrics_listen = \"unix:" + path + "\"\n");
  ASSERT_TRUE(daemon.Start({"--config", daemon.dir() + "/ktesiod.toml"})) << daemon.DaemonLog();
  std::optional<Json> doc = ParseJson(daemon.Ctl({"daemon", "status", "--json"}).out);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ((*doc)["metrics_address"].string, "unix:" + path);
  const std::string raw = UnixGet(path, "/metrics");
  EXPECT_EQ(raw.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << raw;
  EXPECT_NE(raw.find("\nktesio_agents{state=\"running\"} 0\n"), std::string::npos) << raw;
  EXPECT_EQ(UnixGet(path, "/healthz").rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_EQ(daemon.Stop(), 0);
  EXPECT_FALSE(std::filesystem::exists(path)) << "the socket file outlived the daemon";

  for (const char* text : {"nohost:9464", "127.0.0.1:99999", "127.0.0.1", "unix:relative",
                           "::1:9464", "127.0.0.1:-1"}) {
    const std::string bad = text;
    RunResult r = RunProcess({KtesiodPath(), "--state-dir", daemon.dir() + "/other", "--socket",
                              daemon.dir() + "/o.sock", "--metrics-listen", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--metrics-listen: metrics address '" + bad + "'"), std::string::npos)
        << r.err;
  }
  WriteFileOrDie(daemon.dir() + "/bad.toml", "metrics_listen = 9464\n");
  RunResult r = RunProcess({KtesiodPath(), "--state-dir", daemon.dir() + "/other", "--socket",
                            daemon.dir() + "/o.sock", "--config", daemon.dir() + "/bad.toml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'metrics_listen' must be a string"), std::string::npos) << r.err;
}

TEST(MetricsListen, NetworkAddressWarnsAndAPortInUseRefusesToStart) {
  DaemonHarness open;
  ASSERT_TRUE(open.Start({"--metrics-listen", "0.0.0.0:0"})) << open.DaemonLog();
  EXPECT_TRUE(WaitFor([&] {
    return open.DaemonLog().find("is reachable from the network") != std::string::npos;
  })) << open.DaemonLog();
  std::optional<Json> doc = ParseJson(open.Ctl({"daemon", "status", "--json"}).out);
  ASSERT_TRUE(doc.has_value());
  const std::string address = (*doc)["metrics_address"].string;
  ASSERT_EQ(address.rfind("0.0.0.0:", 0), 0u) << address;

  // The same port again: a second daemon refuses to start, naming the address.
  // The endpoint is bound before the API socket, so nothing ever answers on that socket.
  TempDir other;
  RunResult second = RunProcess({KtesiodPath(), "--state-dir", other / "state", "--socket",
                                 other / "d.sock", "--metrics-listen", address});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("start failed: metrics endpoint: cannot listen on " + address),
            std::string::npos)
      << second.err;
  EXPECT_FALSE(std::filesystem::exists(other / "d.sock"));
}

}  // namespace
}  // namespace ktesio::testing
