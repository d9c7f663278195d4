#include "telemetry/otlp_config.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::daemon::telemetry {
namespace {

absl::Status Bad(absl::string_view source, absl::string_view why) {
  return contract::MakeError(absl::StatusCode::kInvalidArgument, contract::reason::kInvalidArgument,
                             absl::StrCat(source, ": ", why));
}

// The first non-empty of the environment variables, else the file key; `source` names it.
struct Setting {
  std::string value;
  std::string source;
};
Setting Pick(const std::function<std::string(const char*)>& env,
             std::initializer_list<const char*> variables, const std::string& file_value,
             const char* file_key) {
  for (const char* variable : variables) {
    if (std::string value = env(variable); !value.empty()) {
      return {value, variable};
    }
  }
  return {file_value, absl::StrCat("ktesiod.toml ", file_key)};
}

// %XX decoding (the W3C baggage form the OTEL_* lists use). False on a malformed escape.
bool PercentDecode(absl::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    int value = 0;
    if (i + 2 >= in.size() || !absl::ascii_isxdigit(in[i + 1]) ||
        !absl::ascii_isxdigit(in[i + 2]) || !absl::SimpleHexAtoi(in.substr(i + 1, 2), &value)) {
      return false;
    }
    out->push_back(static_cast<char>(value));
    i += 2;
  }
  return true;
}

// "k=v,k2=v2" -> pairs; keys trimmed and non-empty, values percent-decoded.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseList(const Setting& setting,
                                                                           bool secret_values) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view item : absl::StrSplit(setting.value, ',', absl::SkipWhitespace())) {
    const size_t eq = item.find('=');
    absl::string_view key = eq == absl::string_view::npos ? item : item.substr(0, eq);
    key = absl::StripAsciiWhitespace(key);
    if (eq == absl::string_view::npos || key.empty()) {
      // Never echo a header item: it may hold a credential.
      return Bad(setting.source, secret_values
                                     ? "expected name=value pairs separated by commas"
                                     : absl::StrCat("expected key=value pairs separated by commas, "
                                                    "got '",
                                                    item, "'"));
    }
    std::string value;
    if (!PercentDecode(absl::StripAsciiWhitespace(item.substr(eq + 1)), &value)) {
      return Bad(setting.source, absl::StrCat("a malformed %-escape in the value of '", key, "'"));
    }
    out.emplace_back(std::string(key), std::move(value));
  }
  return out;
}

absl::StatusOr<std::chrono::milliseconds> ParseMillis(const Setting& setting, int64_t fallback,
                                                      int64_t min, int64_t max) {
  if (setting.value.empty()) {
    return std::chrono::milliseconds(fallback);
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(setting.value, &value) || value < min || value > max) {
    return Bad(setting.source,
               absl::StrCat("must be a whole number of milliseconds from ", min, " to ", max));
  }
  return std::chrono::milliseconds(value);
}

// The collector's URL: scheme, host, port and path (a base endpoint gets /v1/metrics appended;
// a metrics endpoint (`full`) is used as given).
absl::Status ParseEndpoint(const Setting& url, bool full, OtlpConfig* config) {
  // The URL goes into the request line as is: a space, CR or LF would split it (another header,
  // another request), and a URL has none (RFC 3986 percent-encodes them).
  for (const char c : url.value) {
    if (c <= ' ' || c > '~') {
      return Bad(url.source,
                 "the endpoint holds a space, a control character or a non-ASCII byte "
                 "(percent-encode it)");
    }
  }
  absl::string_view rest = url.value;
  if (absl::ConsumePrefix(&rest, "https://")) {
    config->tls = true;
  } else if (!absl::ConsumePrefix(&rest, "http://")) {
    return Bad(url.source, "the endpoint must be an http:// or https:// URL");
  }
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  std::string path = slash == absl::string_view::npos ? "" : std::string(rest.substr(slash));
  if (authority.empty() || authority.find('@') != absl::string_view::npos) {
    return Bad(url.source, "the endpoint needs a host (and no user:password@ part)");
  }
  absl::string_view host = authority;
  absl::string_view port = config->tls ? "443" : "80";
  if (authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return Bad(url.source, "an unterminated [IPv6] host");
    }
    host = authority.substr(1, close - 1);
    absl::string_view after = authority.substr(close + 1);
    if (absl::ConsumePrefix(&after, ":")) {
      port = after;
    } else if (!after.empty()) {
      return Bad(url.source, "unexpected text after the [IPv6] host");
    }
  } else if (const size_t colon = authority.rfind(':'); colon != absl::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  uint32_t port_number = 0;
  if (host.empty() || !absl::SimpleAtoi(port, &port_number) || port_number == 0 ||
      port_number > 65535) {
    return Bad(url.source, "the endpoint needs a host and a port from 1 to 65535");
  }
  if (!full) {
    // The signal path is appended to a base endpoint, as the OTLP exporter specification says.
    while (!path.empty() && path.back() == '/') {
      path.pop_back();
    }
    path += "/v1/metrics";
  } else if (path.empty()) {
    path.push_back('/');  // not `path = "/"`: GCC 12 -O2 reports a false -Wrestrict there
  }
  config->host = std::string(host);
  config->port = std::to_string(port_number);
  config->target = path;
  config->url_shown = absl::StrCat(config->tls ? "https://" : "http://", authority, path);
  return absl::OkStatus();
}

// Headers, resource attributes and the service name.
absl::Status ResolveResource(const OtlpFileSettings& file,
                             const std::function<std::string(const char*)>& env,
                             OtlpConfig* config) {
  Setting headers = Pick(env, {"OTEL_EXPORTER_OTLP_METRICS_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"},
                         file.headers, "otlp_headers");
  KT_ASSIGN_OR_RETURN(auto parsed, ParseList(headers, true));
  config->headers = std::move(parsed);
  for (const auto& [name, value] : config->headers) {
    if (name.find_first_of(" \t\r\n:") != std::string::npos ||
        value.find_first_of("\r\n") != std::string::npos) {
      return Bad(headers.source, absl::StrCat("header '", name, "' is not a valid HTTP header"));
    }
  }
  Setting attributes =
      Pick(env, {"OTEL_RESOURCE_ATTRIBUTES"}, file.resource_attributes, "otlp_resource_attributes");
  KT_ASSIGN_OR_RETURN(auto resource, ParseList(attributes, false));
  config->resource_attributes = std::move(resource);
  Setting service = Pick(env, {"OTEL_SERVICE_NAME"}, file.service_name, "otlp_service_name");
  if (!service.value.empty()) {
    config->service_name = service.value;
  } else {
    for (const auto& [key, value] : config->resource_attributes) {
      if (key == "service.name") {
        config->service_name = value;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OtlpConfig> ResolveOtlp(const OtlpFileSettings& file,
                                       const std::function<std::string(const char*)>& env) {
  OtlpConfig config;
  const std::string disabled = absl::AsciiStrToLower(env("OTEL_SDK_DISABLED"));
  const std::string exporter = absl::AsciiStrToLower(env("OTEL_METRICS_EXPORTER"));
  Setting metrics_url = Pick(env, {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"}, file.metrics_endpoint,
                             "otlp_metrics_endpoint");
  Setting base_url = Pick(env, {"OTEL_EXPORTER_OTLP_ENDPOINT"}, file.endpoint, "otlp_endpoint");
  const bool full = !metrics_url.value.empty();
  Setting url = full ? metrics_url : base_url;
  if (url.value.empty() || disabled == "true" || exporter == "none") {
    return config;  // off
  }
  KT_RETURN_IF_ERROR(ParseEndpoint(url, full, &config));

  KT_RETURN_IF_ERROR(ResolveResource(file, env, &config));
  absl::StatusOr<std::chrono::milliseconds> interval =
      ParseMillis(Pick(env, {"OTEL_METRIC_EXPORT_INTERVAL"}, file.export_interval_ms,
                       "otlp_export_interval_ms"),
                  60000, 100, 86400000);
  if (!interval.ok()) {
    return interval.status();
  }
  config.interval = *interval;
  absl::StatusOr<std::chrono::milliseconds> timeout = ParseMillis(
      Pick(env, {"OTEL_METRIC_EXPORT_TIMEOUT"}, file.export_timeout_ms, "otlp_export_timeout_ms"),
      10000, 100, 600000);
  if (!timeout.ok()) {
    return timeout.status();
  }
  config.timeout = *timeout;
  Setting protocol =
      Pick(env, {"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"},
           file.protocol, "otlp_protocol");
  if (!protocol.value.empty() && protocol.value != "http/json") {
    config.unsupported =
        absl::StrCat("OTLP export is off: ", protocol.source, " asks for '", protocol.value,
                     "'; this build exports OTLP over HTTP with JSON only "
                     "(http/json)");
    return config;
  }
  config.enabled = true;
  return config;
}

}  // namespace ktesio::daemon::telemetry
