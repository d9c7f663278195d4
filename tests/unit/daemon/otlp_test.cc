// OTLP export as pure functions: the OTEL_* / otlp_* configuration (precedence, URL and list
// parsing, refusals that never echo a header value, the unsupported protocol) and the JSON body
// (resource, cumulative sums, histograms, the GenAI token-usage metric).

#include <functional>
#include <map>

#include "gtest/gtest.h"
#include "json.h"
#include "telemetry/otlp.h"
#include "telemetry/otlp_config.h"

namespace ktesio::daemon::telemetry {
namespace {

using testing::Json;
using testing::ParseJson;

std::function<std::string(const char*)> Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) {
    auto it = vars.find(name);
    return it == vars.end() ? std::string() : it->second;
  };
}

TEST(ResolveOtlp, OffUnlessAnEndpointIsSet) {
  absl::StatusOr<OtlpConfig> config = ResolveOtlp({}, Env({}));
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(config->enabled);
  config = ResolveOtlp(
      {}, Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"}, {"OTEL_SDK_DISABLED", "true"}}));
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(config->enabled);
  config = ResolveOtlp({}, Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
                                {"OTEL_METRICS_EXPORTER", "none"}}));
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(config->enabled);
}

TEST(ResolveOtlp, BaseEndpointGetsTheSignalPathAndEnvironmentWins) {
  OtlpFileSettings file;
  file.endpoint = "http://from-file:1/";
  file.service_name = "file-name";
  absl::StatusOr<OtlpConfig> config = ResolveOtlp(
      file, Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector.example:4318/otlp/"},
                 {"OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20s3cret, x-tenant = t1"},
                 {"OTEL_METRIC_EXPORT_INTERVAL", "250"},
                 {"OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci,host.name=h%2C1"}}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->enabled);
  EXPECT_TRUE(config->tls);
  EXPECT_EQ(config->host, "collector.example");
  EXPECT_EQ(config->port, "4318");
  EXPECT_EQ(config->target, "/otlp/v1/metrics");
  EXPECT_EQ(config->url_shown, "https://collector.example:4318/otlp/v1/metrics");
  ASSERT_EQ(config->headers.size(), 2u);
  EXPECT_EQ(config->headers[0],
            (std::pair<std::string, std::string>{"Authorization", "Bearer s3cret"}));
  EXPECT_EQ(config->headers[1], (std::pair<std::string, std::string>{"x-tenant", "t1"}));
  EXPECT_EQ(config->interval.count(), 250);
  EXPECT_EQ(config->service_name, "file-name");  // no OTEL_SERVICE_NAME: the file's
  ASSERT_EQ(config->resource_attributes.size(), 2u);
  EXPECT_EQ(config->resource_attributes[1].second, "h,1");

  // The metrics endpoint is used as is, and wins over the base; the default port follows the
  // scheme.
  config = ResolveOtlp(file, Env({{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://[::1]/m"},
                                  {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:1"},
                                  {"OTEL_SERVICE_NAME", "env-name"}}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->host, "::1");
  EXPECT_EQ(config->port, "80");
  EXPECT_EQ(config->target, "/m");
  EXPECT_EQ(config->service_name, "env-name");
  // The file alone configures it too.
  config = ResolveOtlp(file, Env({}));
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->host, "from-file");
  EXPECT_EQ(config->target, "/v1/metrics");
}

TEST(ResolveOtlp, RefusesMalformedSettingsWithoutEchoingSecrets) {
  struct Case {
    std::map<std::string, std::string> env;
    std::string names;
  };
  for (const Case& c : std::vector<Case>{
           {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "grpc://c:4317"}}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
           {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:pw@c:4318"}},
            "OTEL_EXPORTER_OTLP_ENDPOINT"},
           {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:0"}}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
           {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://:4318"}}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
           // A CR/LF in the path would add headers or a second request; a space splits the line.
           {{{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
              "http://c:4318/v1/x HTTP/1.1\r\nX-Injected: yes\r\n\r\nGET /smuggled"}},
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"},
           {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/v 1"}}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
           {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c\x01:4318"}}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
           {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
             {"OTEL_EXPORTER_OTLP_HEADERS", "Authorization: Bearer topsecret"}},
            "OTEL_EXPORTER_OTLP_HEADERS"},
           {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
             {"OTEL_EXPORTER_OTLP_HEADERS", "a=topsecret%zz"}},
            "OTEL_EXPORTER_OTLP_HEADERS"},
           {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
             {"OTEL_EXPORTER_OTLP_HEADERS", "a=top%0d%0asecret"}},
            "OTEL_EXPORTER_OTLP_HEADERS"},
           {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
             {"OTEL_METRIC_EXPORT_INTERVAL", "soon"}},
            "OTEL_METRIC_EXPORT_INTERVAL"},
           {{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
             {"OTEL_METRIC_EXPORT_INTERVAL", "5"}},
            "OTEL_METRIC_EXPORT_INTERVAL"},
       }) {
    absl::StatusOr<OtlpConfig> config = ResolveOtlp({}, Env(c.env));
    ASSERT_FALSE(config.ok()) << c.names;
    EXPECT_NE(config.status().message().find(c.names), absl::string_view::npos) << config.status();
    EXPECT_EQ(config.status().message().find("topsecret"), absl::string_view::npos)
        << config.status();
  }
}

TEST(ResolveOtlp, UnsupportedProtocolTurnsExportOffWithAReason) {
  absl::StatusOr<OtlpConfig> config =
      ResolveOtlp({}, Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"},
                           {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}}));
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(config->enabled);
  EXPECT_NE(config->unsupported.find("'grpc'"), std::string::npos) << config->unsupported;
  EXPECT_NE(config->unsupported.find("http/json"), std::string::npos);
  config = ResolveOtlp({}, Env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
                                {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"}}));
  ASSERT_TRUE(config.ok());
  EXPECT_TRUE(config->enabled);
}

const Json* FindMetric(const Json& doc, const std::string& name) {
  for (const Json& metric :
       doc["resourceMetrics"].array[0]["scopeMetrics"].array[0]["metrics"].array) {
    if (metric["name"].string == name) {
      return &metric;
    }
  }
  return nullptr;
}

std::string Attribute(const Json& point, const std::string& key) {
  for (const Json& a : point["attributes"].array) {
    if (a["key"].string == key) {
      return a["value"]["stringValue"].string;
    }
  }
  return "<absent>";
}

TEST(RenderOtlpJson, ResourceSumsAndTheGenAiHistogram) {
  MetricsSnapshot s;
  s.daemon_version = "0.1.0";
  s.api_version = "1.0.0";
  s.contract_version = "1.0.0";
  s.daemon_start_time_seconds = 1000;
  v1::AgentInstance* a = s.agents.add_instances();
  a->set_name("e");
  a->set_state(v1::AGENT_STATE_RUNNING);
  a->set_metering_source(v1::METERING_SOURCE_ENGINE_OBSERVED);
  a->mutable_usage()->set_cumulative_input_tokens(9007199254740993ull);  // > 2^53: exact
  a->mutable_usage()->set_cumulative_dollars(1500000);
  a->mutable_budget()->set_per_run_limit(100);
  a->set_started_at_unix_ms(1'500'000);
  a->mutable_resources()->set_cpu_seconds(0.25);
  s.counters["e"].known_calls = 2;
  GenAiTokenUsage input{"e", "openai", "chat", "input", "", {}};
  input.tokens.Observe(10);
  input.tokens.Observe(300);
  s.genai.push_back(input);
  GenAiTokenUsage modelled{"e", "openai", "chat", "output", "gpt-4o", {}};
  modelled.tokens.Observe(5);
  s.genai.push_back(modelled);
  OtlpConfig config;
  config.service_name = "kt";
  config.resource_attributes = {{"deployment.environment", "ci"}, {"service.name", "ignored"}};

  std::optional<Json> doc = ParseJson(RenderOtlpJson(s, config, 2000000000000));
  ASSERT_TRUE(doc.has_value());
  const Json& resource = (*doc)["resourceMetrics"].array[0]["resource"];
  EXPECT_EQ(Attribute(resource, "service.name"), "kt");
  EXPECT_EQ(Attribute(resource, "service.version"), "0.1.0");
  EXPECT_EQ(Attribute(resource, "deployment.environment"), "ci");

  const Json* tokens = FindMetric(*doc, "ktesio.agent.tokens");
  ASSERT_NE(tokens, nullptr);
  const Json& sum = (*tokens)["sum"];
  EXPECT_EQ(sum["aggregationTemporality"].Int(), 2);
  EXPECT_TRUE(sum["isMonotonic"].boolean);
  const Json& point = sum["dataPoints"].array[0];
  EXPECT_EQ(Attribute(point, "ktesio.agent"), "e");
  EXPECT_EQ(Attribute(point, "direction"), "input");
  EXPECT_EQ(point["asInt"].string, "9007199254740993");
  EXPECT_EQ(point["startTimeUnixNano"].string, "1000000000000");
  EXPECT_EQ(point["timeUnixNano"].string, "2000000000000");

  const Json* spend = FindMetric(*doc, "ktesio.agent.spend");
  ASSERT_NE(spend, nullptr);
  EXPECT_EQ((*spend)["unit"].string, "USD");
  EXPECT_EQ((*spend)["sum"]["dataPoints"].array[0]["asDouble"].number, "1.5");

  const Json* genai = FindMetric(*doc, "gen_ai.client.token.usage");
  ASSERT_NE(genai, nullptr);
  EXPECT_EQ((*genai)["unit"].string, "{token}");
  const Json& h = (*genai)["histogram"]["dataPoints"].array[0];
  EXPECT_EQ(Attribute(h, "gen_ai.token.type"), "input");
  EXPECT_EQ(Attribute(h, "gen_ai.provider.name"), "openai");
  EXPECT_EQ(Attribute(h, "gen_ai.operation.name"), "chat");
  EXPECT_EQ(Attribute(h, "gen_ai.request.model"), "<absent>");  // not known: not set
  EXPECT_EQ(h["count"].string, "2");
  const Json& with_model = (*genai)["histogram"]["dataPoints"].array[1];
  EXPECT_EQ(Attribute(with_model, "gen_ai.request.model"), "gpt-4o");
  EXPECT_EQ(Attribute(with_model, "gen_ai.token.type"), "output");
  EXPECT_EQ(h["sum"].number, "310");
  ASSERT_EQ(h["bucketCounts"].array.size(), h["explicitBounds"].array.size() + 1);
  // 10 falls in (4, 16], 300 in (256, 1024].
  EXPECT_EQ(h["bucketCounts"].array[2].string, "1");
  EXPECT_EQ(h["bucketCounts"].array[5].string, "1");

  const Json* calls = FindMetric(*doc, "ktesio.agent.model_calls");
  ASSERT_NE(calls, nullptr);
  EXPECT_EQ((*calls)["sum"]["dataPoints"].array[0]["asInt"].string, "2");
  EXPECT_NE(FindMetric(*doc, "ktesio.agents"), nullptr);
  EXPECT_NE(FindMetric(*doc, "process.memory.usage"), nullptr);

  // As on /metrics: zeros for every breach action of a budgeted agent and every upstream error
  // reason of an engine-observed one, so a consumer sees the first breach or error as an increase.
  const Json* breaches = FindMetric(*doc, "ktesio.agent.budget.breaches");
  ASSERT_NE(breaches, nullptr);
  ASSERT_EQ((*breaches)["sum"]["dataPoints"].array.size(), 3u);
  EXPECT_EQ((*breaches)["sum"]["dataPoints"].array[0]["asInt"].string, "0");
  const Json* errors = FindMetric(*doc, "ktesio.proxy.upstream_errors");
  ASSERT_NE(errors, nullptr);
  EXPECT_EQ((*errors)["sum"]["dataPoints"].array.size(), 6u);
  // The tree's CPU time counts from the run's start, and says so.
  const Json* cpu = FindMetric(*doc, "ktesio.agent.cpu.time");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ((*cpu)["sum"]["dataPoints"].array[0]["startTimeUnixNano"].string, "1500000000000");
}

}  // namespace
}  // namespace ktesio::daemon::telemetry
