#pragma once

// Where and how the daemon pushes its metrics over OTLP/HTTP, configured the way every
// OpenTelemetry SDK is: the standard OTEL_* environment variables, or the same settings as
// `otlp_*` keys of ktesiod.toml (the environment wins, as KTESIO_SOCKET does over `socket`).
// Header values are secrets: nothing here ever logs or shows them.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ktesio::daemon::telemetry {

// The `otlp_*` keys of ktesiod.toml, raw ("" = unset).
struct OtlpFileSettings {
  std::string endpoint;             // otlp_endpoint: base URL, "/v1/metrics" is appended
  std::string metrics_endpoint;     // otlp_metrics_endpoint: the full URL, used as is
  std::string headers;              // otlp_headers: "name=value,name2=value2" (values: secrets)
  std::string protocol;             // otlp_protocol: only "http/json"
  std::string export_interval_ms;   // otlp_export_interval_ms
  std::string export_timeout_ms;    // otlp_export_timeout_ms
  std::string service_name;         // otlp_service_name
  std::string resource_attributes;  // otlp_resource_attributes: "key=value,..."
  bool operator==(const OtlpFileSettings&) const = default;
};

struct OtlpConfig {
  bool enabled = false;  // an endpoint is set and the exporter is not disabled
  bool tls = false;
  std::string host;
  std::string port;
  std::string target;     // the request path, e.g. "/v1/metrics"
  std::string url_shown;  // scheme://host:port/path, for logs and status (no credentials)
  std::vector<std::pair<std::string, std::string>> headers;  // values are secrets
  std::chrono::milliseconds interval{60000};
  std::chrono::milliseconds timeout{10000};
  std::string service_name = "ktesiod";
  std::vector<std::pair<std::string, std::string>> resource_attributes;
  // Set when the configuration asks for something this build does not do (a protocol other than
  // http/json): export stays off and the daemon reports this as a problem.
  std::string unsupported;
};

// Resolves the settings. `env` returns a variable's value or "". Errors: INVALID_ARGUMENT
// naming the variable or key and what is wrong (a malformed URL, header list, number).
absl::StatusOr<OtlpConfig> ResolveOtlp(const OtlpFileSettings& file,
                                       const std::function<std::string(const char*)>& env);

}  // namespace ktesio::daemon::telemetry
