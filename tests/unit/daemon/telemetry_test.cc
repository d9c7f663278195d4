// Telemetry as pure functions: the Prometheus rendering of a snapshot (exact lines, escaping,
// exact dollars, zero-filled states, series only where they apply), the listen-address parser,
// and the process-tree sampler on a real child.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "gtest/gtest.h"
#include "telemetry/metrics.h"
#include "telemetry/metrics_server.h"
#include "telemetry/proc_stats.h"

namespace ktesio::daemon::telemetry {
namespace {

bool HasLine(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

MetricsSnapshot Sample() {
  MetricsSnapshot s;
  s.daemon_version = "0.1.0";
  s.api_version = "1.0.0";
  s.contract_version = "1.0.0";
  s.daemon_start_time_seconds = 1764633600.125;
  v1::AgentInstance* a = s.agents.add_instances();
  a->set_name("alpha");
  a->set_kind("echo \"quoted\" \\ kind");
  a->set_state(v1::AGENT_STATE_RUNNING);
  a->set_restart_count(1);  // since the last operator start; the counter is the lifetime total
  a->set_restarts_total(3);
  a->set_metering_source(v1::METERING_SOURCE_ENGINE_OBSERVED);
  a->mutable_usage()->set_cumulative_input_tokens(1234567890123);
  a->mutable_usage()->set_cumulative_output_tokens(7);
  a->mutable_usage()->set_cumulative_dollars(12000001);
  a->mutable_budget()->set_per_run_limit(100);
  a->mutable_budget()->set_per_run_remaining(40);
  a->mutable_budget()->set_cumulative_cost_cap(50000000);
  a->mutable_budget()->set_cumulative_dollars_remaining(37999999);
  a->mutable_resources()->set_cpu_seconds(1.5);
  a->mutable_resources()->set_resident_memory_bytes(4096);
  v1::AgentInstance* b = s.agents.add_instances();
  b->set_name("beta");
  b->set_kind("mock");
  b->set_state(v1::AGENT_STATE_STOPPED);
  b->set_metering_source(v1::METERING_SOURCE_SELF_REPORTED);
  v1::AgentInstance* c = s.agents.add_instances();
  c->set_name("gamma");
  c->set_kind("mock");
  c->set_state(v1::AGENT_STATE_FAILED);
  c->set_failed_cause("crash-loop{5 consecutive crashes, last: exit code 3}");
  v1::AgentInstance* d = s.agents.add_instances();
  d->set_name("delta");
  d->set_kind("mock");
  d->set_state(v1::AGENT_STATE_FAILED);
  d->set_failed_cause("something new{x}");
  s.counters["alpha"].known_calls = 9;
  s.counters["alpha"].unknown_calls = 2;
  s.counters["alpha"].breaches_by_action["pause"] = 1;
  s.proxy["alpha"].added_before_first_byte.Observe(0.00048828125);  // 2^-11: exact sums
  s.proxy["alpha"].added_before_first_byte.Observe(2.0);
  s.proxy["alpha"].upstream_errors["connect"] = 4;
  s.events_by_type["transition"] = 12;
  s.api_requests.push_back({"ktesio.v1.AgentService/StartAgent", "OK", 5});
  s.self.open_fds = 17;
  return s;
}

TEST(RenderPrometheus, ExactSamples) {
  const std::string text = RenderPrometheus(Sample());
  EXPECT_TRUE(HasLine(text,
                      "ktesio_build_info{version=\"0.1.0\",api_version=\"1.0.0\",contract_version="
                      "\"1.0.0\"} 1"))
      << text;
  EXPECT_TRUE(HasLine(text, "ktesio_daemon_start_time_seconds 1764633600.125"));
  EXPECT_TRUE(HasLine(text, "ktesio_agents{state=\"running\"} 1"));
  EXPECT_TRUE(HasLine(text, "ktesio_agents{state=\"stopped\"} 1"));
  EXPECT_TRUE(HasLine(text, "ktesio_agent_failed{agent=\"gamma\",cause=\"crash-loop\"} 1"));
  EXPECT_TRUE(HasLine(text, "ktesio_agent_failed{agent=\"delta\",cause=\"other\"} 1"));
  EXPECT_EQ(text.find("ktesio_agent_failed{agent=\"alpha\""), std::string::npos);
  EXPECT_TRUE(HasLine(text, "ktesio_agents{state=\"paused\"} 0"));
  EXPECT_TRUE(HasLine(text,
                      "ktesio_agent_info{agent=\"alpha\",kind=\"echo \\\"quoted\\\" \\\\ kind\","
                      "metering_source=\"engine-observed\"} 1"));
  EXPECT_TRUE(HasLine(text, "ktesio_agent_state{agent=\"alpha\",state=\"running\"} 1"));
  EXPECT_TRUE(HasLine(text, "ktesio_agent_state{agent=\"alpha\",state=\"failed\"} 0"));
  EXPECT_TRUE(HasLine(text, "ktesio_agent_restarts_total{agent=\"alpha\"} 3"));
  // Large counters stay exact integers.
  EXPECT_TRUE(HasLine(
      text, "ktesio_agent_tokens_total{agent=\"alpha\",direction=\"input\"} 1234567890123"));
  EXPECT_TRUE(HasLine(text, "ktesio_agent_model_calls_total{agent=\"alpha\",usage=\"known\"} 9"));
  EXPECT_TRUE(HasLine(text, "ktesio_agent_model_calls_total{agent=\"alpha\",usage=\"unknown\"} 2"));
  EXPECT_TRUE(HasLine(text, "ktesio_agent_spend_dollars_total{agent=\"alpha\"} 12.000001"));
  EXPECT_TRUE(HasLine(
      text, "ktesio_agent_budget_limit{agent=\"alpha\",scope=\"run\",dimension=\"tokens\"} 100"));
  EXPECT_TRUE(HasLine(
      text,
      "ktesio_agent_budget_remaining{agent=\"alpha\",scope=\"run\",dimension=\"tokens\"} 40"));
  EXPECT_TRUE(HasLine(text,
                      "ktesio_agent_budget_limit{agent=\"alpha\",scope=\"cumulative\",dimension="
                      "\"dollars\"} 50"));
  EXPECT_TRUE(HasLine(text,
                      "ktesio_agent_budget_remaining{agent=\"alpha\",scope=\"cumulative\","
                      "dimension=\"dollars\"} 37.999999"));
  EXPECT_TRUE(
      HasLine(text, "ktesio_agent_budget_breaches_total{agent=\"alpha\",action=\"pause\"} 1"));
  // Zeros for the other actions of a budgeted instance, so increase() sees a first breach.
  EXPECT_TRUE(
      HasLine(text, "ktesio_agent_budget_breaches_total{agent=\"alpha\",action=\"stop\"} 0"));
  EXPECT_EQ(text.find("ktesio_agent_budget_breaches_total{agent=\"beta\""), std::string::npos);
  EXPECT_TRUE(
      HasLine(text, "ktesio_proxy_upstream_errors_total{agent=\"alpha\",reason=\"cut\"} 0"));
  EXPECT_TRUE(HasLine(text, "ktesio_agent_cpu_seconds_total{agent=\"alpha\"} 1.5"));
  EXPECT_TRUE(HasLine(text, "ktesio_agent_resident_memory_bytes{agent=\"alpha\"} 4096"));
  EXPECT_TRUE(HasLine(text, "ktesio_events_total{type=\"transition\"} 12"));
  EXPECT_TRUE(HasLine(
      text, "ktesio_api_requests_total{rpc=\"ktesio.v1.AgentService/StartAgent\",code=\"OK\"} 5"));
  EXPECT_TRUE(HasLine(text, "process_open_fds 17"));
  // The histogram: cumulative buckets, +Inf, sum and count.
  EXPECT_TRUE(HasLine(
      text, "ktesio_proxy_request_duration_seconds_bucket{agent=\"alpha\",le=\"0.00025\"} 0"));
  EXPECT_TRUE(HasLine(
      text, "ktesio_proxy_request_duration_seconds_bucket{agent=\"alpha\",le=\"0.0005\"} 1"));
  EXPECT_TRUE(
      HasLine(text, "ktesio_proxy_request_duration_seconds_bucket{agent=\"alpha\",le=\"1\"} 1"));
  EXPECT_TRUE(
      HasLine(text, "ktesio_proxy_request_duration_seconds_bucket{agent=\"alpha\",le=\"+Inf\"} 2"));
  EXPECT_TRUE(HasLine(text, "ktesio_proxy_request_duration_seconds_count{agent=\"alpha\"} 2"));
  EXPECT_TRUE(
      HasLine(text, "ktesio_proxy_request_duration_seconds_sum{agent=\"alpha\"} 2.00048828125"));
  EXPECT_TRUE(
      HasLine(text, "ktesio_proxy_upstream_errors_total{agent=\"alpha\",reason=\"connect\"} 4"));
  EXPECT_EQ(text.find("ktesio_proxy_request_duration_seconds_count{agent=\"beta\"}"),
            std::string::npos);
  EXPECT_TRUE(HasLine(text, "# TYPE ktesio_agent_tokens_total counter"));
  EXPECT_TRUE(HasLine(text, "# TYPE ktesio_agent_resident_memory_bytes gauge"));
}

TEST(RenderPrometheus, SeriesOnlyWhereTheyApply) {
  const std::string text = RenderPrometheus(Sample());
  // beta: self-reported (no proxied calls), unpriced (no spend), no budget, no processes.
  EXPECT_EQ(text.find("ktesio_agent_model_calls_total{agent=\"beta\""), std::string::npos);
  EXPECT_EQ(text.find("ktesio_agent_spend_dollars_total{agent=\"beta\""), std::string::npos);
  EXPECT_EQ(text.find("ktesio_agent_budget_limit{agent=\"beta\""), std::string::npos);
  EXPECT_EQ(text.find("ktesio_agent_resident_memory_bytes{agent=\"beta\""), std::string::npos);
  EXPECT_TRUE(HasLine(text, "ktesio_agent_tokens_total{agent=\"beta\",direction=\"input\"} 0"));
  // Every family is declared once.
  size_t types = 0;
  for (size_t at = 0; (at = text.find("# TYPE ktesio_agent_state ", at)) != std::string::npos;
       ++at) {
    ++types;
  }
  EXPECT_EQ(types, 1u);
}

TEST(ParseListenAddress, AcceptsTheDocumentedForms) {
  absl::StatusOr<ListenAddress> v4 = ParseListenAddress("127.0.0.1:9464");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->kind, ListenAddress::Kind::kTcp);
  EXPECT_EQ(v4->ip, "127.0.0.1");
  EXPECT_EQ(v4->port, 9464);
  EXPECT_TRUE(v4->loopback);
  absl::StatusOr<ListenAddress> v6 = ParseListenAddress("[::1]:0");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->ip, "::1");
  EXPECT_EQ(v6->port, 0);
  EXPECT_TRUE(v6->loopback);
  absl::StatusOr<ListenAddress> local = ParseListenAddress("localhost:1");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->ip, "127.0.0.1");
  absl::StatusOr<ListenAddress> any = ParseListenAddress("0.0.0.0:9464");
  ASSERT_TRUE(any.ok());
  EXPECT_FALSE(any->loopback);
  absl::StatusOr<ListenAddress> unix_socket = ParseListenAddress("unix:/run/ktesio/m.sock");
  ASSERT_TRUE(unix_socket.ok());
  EXPECT_EQ(unix_socket->kind, ListenAddress::Kind::kUnix);
  EXPECT_EQ(unix_socket->path, "/run/ktesio/m.sock");
}

TEST(ParseListenAddress, ResolvesAHostNameOnceToItsFirstAddress) {
  // The machine's own name (resolvable through /etc/hosts on the machines this runs on): the
  // address bound is the first one the resolver gives.
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof(name) - 1), 0);
  boost::asio::io_context io;
  boost::asio::ip::tcp::resolver resolver(io);
  boost::system::error_code ec;
  const auto endpoints = resolver.resolve(name, "9464", ec);
  ASSERT_FALSE(ec) << name << " does not resolve here: " << ec.message();
  ASSERT_FALSE(endpoints.empty());
  const std::string first = endpoints.begin()->endpoint().address().to_string();
  absl::StatusOr<ListenAddress> named = ParseListenAddress(std::string(name) + ":9464");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->ip, first);
  EXPECT_EQ(named->port, 9464);
  absl::StatusOr<ListenAddress> unknown = ParseListenAddress("no-such-host.invalid:9464");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("cannot resolve the host 'no-such-host.invalid'"),
            absl::string_view::npos)
      << unknown.status();
}

TEST(ParseListenAddress, RefusesWithAReason) {
  for (const char* bad :
       {"", ":9464", "9464", "host.example:80", "127.0.0.1:65536", "127.0.0.1:", "127.0.0.1:+1",
        "::1:80", "[::1:80", "unix:", "unix:rel", "300.1.1.1:80"}) {
    absl::StatusOr<ListenAddress> parsed = ParseListenAddress(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("metrics address '"), absl::string_view::npos) << bad;
  }
  EXPECT_FALSE(ParseListenAddress("unix:/" + std::string(200, 'x')).ok());
  // A URL is the likely mistake: the message says an address is wanted, not brackets.
  absl::StatusOr<ListenAddress> url = ParseListenAddress("http://127.0.0.1:9464");
  ASSERT_FALSE(url.ok());
  EXPECT_NE(url.status().message().find("not a URL"), absl::string_view::npos) << url.status();
}

TEST(SampleTree, CountsARealChildTree) {
  // A child that forks a grandchild; both sleep. The tree under us holds both.
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setpgid(0, 0);
    if (fork() == 0) {
      execl("/bin/sleep", "sleep", "30", nullptr);
      _exit(127);
    }
    execl("/bin/sleep", "sleep", "30", nullptr);
    _exit(127);
  }
  std::optional<TreeStats> tree;
  for (int i = 0; i < 200; ++i) {
    tree = SampleTree(getpid(), 0, false);
    // Both children have exec'd sleep (a child caught between fork and exec may show no RSS).
    if (tree.has_value() && tree->processes >= 2 && tree->resident_bytes > 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(tree.has_value());
  EXPECT_GE(tree->processes, 2u);
  EXPECT_GT(tree->resident_bytes, 0u);
  std::optional<TreeStats> self = SampleTree(getpid(), 0, true);
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(self->processes, tree->processes + 1);
  EXPECT_FALSE(SampleTree(getpid(), 12345, false).has_value()) << "a wrong start time is refused";
  kill(-child, SIGKILL);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  SelfStats me = SampleSelf();
  EXPECT_GT(me.open_fds, 2u);
  EXPECT_GT(me.resident_bytes, 0u);
  EXPECT_GT(me.start_time_seconds, 1.7e9);
}

}  // namespace
}  // namespace ktesio::daemon::telemetry
