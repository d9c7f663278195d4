// ktesiod.toml (docs/operations.md): one table of keys, each with its check and its target in
// DaemonOptions. Flags win over the file for the keys that have a flag.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

#include "daemon/options.h"
#include "fs/fs.h"
#include "ktesio/contract/text.h"
#include "ktesio/contract/toml_depth.h"
#include "paths/paths.h"
#include "telemetry/metrics_server.h"

namespace ktesio::daemon {
namespace {

using contract::text::Cat;

// Checks a key's value and stores it: "" when fine, else what is wrong (the caller adds where).
using Apply = std::function<std::string(const toml::node&, DaemonOptions&)>;

std::string MustBe(std::string_view key, std::string_view what) {
  return Cat("'", key, "' must be ", what);
}

// An integer key in [min, max] (`note` follows the range in the message).
template <typename T>
Apply Integer(std::string_view key, T DaemonOptions::*field, int64_t min, int64_t max,
              std::string_view note = "") {
  return [=](const toml::node& node, DaemonOptions& options) -> std::string {
    std::optional<int64_t> value = node.value_exact<int64_t>();
    if (!value || *value < min || *value > max) {
      return MustBe(key, Cat("an integer from ", min, " to ", max, note));
    }
    options.*field = static_cast<T>(*value);
    return "";
  };
}

// An OTLP setting, kept as text (integers as their decimal text) for telemetry::OtlpConfig.
Apply Otlp(std::string_view key, std::string telemetry::OtlpFileSettings::*field, bool integer) {
  return [=](const toml::node& node, DaemonOptions& options) -> std::string {
    if (integer) {
      std::optional<int64_t> value = node.value_exact<int64_t>();
      if (!value) {
        return MustBe(key, "an integer");
      }
      options.otlp.*field = std::to_string(*value);
      return "";
    }
    std::optional<std::string> value = node.value<std::string>();
    if (!value) {
      return MustBe(key, "a string");
    }
    options.otlp.*field = *value;
    return "";
  };
}

std::string ApplyLogLevel(const toml::node& node, DaemonOptions& options) {
  std::optional<std::string> value = node.value<std::string>();
  if (!value) {
    return MustBe("log_level", "a string");
  }
  if (!ValidLogLevel(*value)) {
    return Cat("unknown log level '", *value, "'");
  }
  if (!options.log_level_from_flag) {
    options.log_level = *value;
  }
  return "";
}

std::string ApplySocketGroup(const toml::node& node, DaemonOptions& options) {
  std::optional<std::string> value = node.value<std::string>();
  if (!value) {
    return MustBe("socket_group", "a string");
  }
  if (!options.socket_group_from_flag) {
    options.socket_group = *value;
  }
  return "";
}

std::string ApplySocket(const toml::node& node, DaemonOptions& options) {
  std::optional<std::string> value = node.value<std::string>();
  if (!value || value->empty() || value->front() != '/') {
    return MustBe("socket", "an absolute path");
  }
  if (absl::Status status = ValidateSocketPath(*value); !status.ok()) {
    return std::string(status.message());
  }
  options.config_socket = *value;
  return "";
}

std::string ApplyMetricsListen(const toml::node& node, DaemonOptions& options) {
  std::optional<std::string> value = node.value<std::string>();
  if (!value) {
    return MustBe("metrics_listen", "a string");
  }
  if (!value->empty()) {  // "" turns the endpoint off
    if (absl::StatusOr<telemetry::ListenAddress> address = telemetry::ParseListenAddress(*value);
        !address.ok()) {
      return std::string(address.status().message());
    }
  }
  if (!options.metrics_listen_from_flag) {
    options.metrics_listen = *value;
  }
  return "";
}

std::string ApplyMeteringCaFile(const toml::node& node, DaemonOptions& options) {
  std::optional<std::string> value = node.value<std::string>();
  if (!value || value->empty() || value->front() != '/') {
    return MustBe("metering_ca_file", "an absolute path");
  }
  options.metering_ca_file = *value;
  return "";
}

std::string ApplyMaxRequestBytes(const toml::node& node, DaemonOptions& options) {
  std::optional<int64_t> value = node.value<int64_t>();
  if (!value || *value < 1024 || *value > (int64_t{1} << 32)) {
    return MustBe("metering_max_request_bytes", "an integer from 1024 to 4294967296");
  }
  options.metering_max_request_bytes = static_cast<uint64_t>(*value);
  return "";
}

std::string ApplyRelayScheduling(const toml::node& node, DaemonOptions& options) {
  std::optional<std::string> value = node.value<std::string>();
  if (!value || (*value != "batch" && *value != "normal")) {
    return MustBe("metering_relay_scheduling", "\"batch\" or \"normal\"");
  }
  options.metering_relay_batch = *value == "batch";
  return "";
}

const std::map<std::string_view, Apply>& Keys() {
  using O = DaemonOptions;
  using S = telemetry::OtlpFileSettings;
  constexpr int64_t kRetentionMax = int64_t{1} << 40;
  static const auto* keys = new std::map<std::string_view, Apply>{
      {"version",
       [](const toml::node& node, DaemonOptions&) -> std::string {
         std::optional<int64_t> version = node.value<int64_t>();
         return version && *version == 1 ? "" : MustBe("version", "1");
       }},
      {"log_level", ApplyLogLevel},
      {"socket", ApplySocket},
      {"socket_group", ApplySocketGroup},
      {"metrics_listen", ApplyMetricsListen},
      {"metering_ca_file", ApplyMeteringCaFile},
      {"metering_max_request_bytes", ApplyMaxRequestBytes},
      {"metering_max_connections",
       Integer("metering_max_connections", &O::metering_max_connections, 1, 1000000)},
      {"metering_max_connections_per_agent",
       Integer("metering_max_connections_per_agent", &O::metering_max_connections_per_agent, 1,
               1000000)},
      {"metering_header_timeout_secs",
       Integer("metering_header_timeout_secs", &O::metering_header_timeout_secs, 1, 3600)},
      {"metering_relay_scheduling", ApplyRelayScheduling},
      {"stop_timeout_secs", Integer("stop_timeout_secs", &O::stop_timeout_secs, 0, 86400)},
      {"max_instances", Integer("max_instances", &O::max_instances, 1, 1000000)},
      {"max_streams", Integer("max_streams", &O::max_streams, 1, 100000)},
      {"api_idle_timeout_secs",
       Integer("api_idle_timeout_secs", &O::api_idle_timeout_secs, 1, 86400)},
      {"memory_trim_idle_secs",
       Integer("memory_trim_idle_secs", &O::memory_trim_idle_secs, 0, 86400, " (0 = never)")},
      {"retention_events_secs", Integer("retention_events_secs", &O::retention_events_secs, 0,
                                        kRetentionMax, " (0 = no limit)")},
      {"retention_events_max", Integer("retention_events_max", &O::retention_events_max, 0,
                                       kRetentionMax, " (0 = no limit)")},
      {"retention_audit_secs", Integer("retention_audit_secs", &O::retention_audit_secs, 0,
                                       kRetentionMax, " (0 = no limit)")},
      {"retention_ledger_secs", Integer("retention_ledger_secs", &O::retention_ledger_secs, 0,
                                        kRetentionMax, " (0 = no limit)")},
      {"retention_interval_secs",
       Integer("retention_interval_secs", &O::retention_interval_secs, 1, kRetentionMax)},
      {"otlp_endpoint", Otlp("otlp_endpoint", &S::endpoint, false)},
      {"otlp_metrics_endpoint", Otlp("otlp_metrics_endpoint", &S::metrics_endpoint, false)},
      {"otlp_headers", Otlp("otlp_headers", &S::headers, false)},
      {"otlp_protocol", Otlp("otlp_protocol", &S::protocol, false)},
      {"otlp_service_name", Otlp("otlp_service_name", &S::service_name, false)},
      {"otlp_resource_attributes",
       Otlp("otlp_resource_attributes", &S::resource_attributes, false)},
      {"otlp_export_interval_ms", Otlp("otlp_export_interval_ms", &S::export_interval_ms, true)},
      {"otlp_export_timeout_ms", Otlp("otlp_export_timeout_ms", &S::export_timeout_ms, true)},
  };
  return *keys;
}

// The message for a key that is not in the table, listing what is known near it.
std::string UnknownKey(std::string_view name) {
  const std::string_view known =
      name.starts_with("otlp_")
          ? "known otlp_ keys: otlp_endpoint, otlp_metrics_endpoint, otlp_headers, "
            "otlp_protocol, otlp_service_name, otlp_resource_attributes, "
            "otlp_export_interval_ms, otlp_export_timeout_ms"
      : name.starts_with("retention_")
          ? "retention keys: retention_events_secs, retention_events_max, retention_audit_secs, "
            "retention_ledger_secs, retention_interval_secs"
          : "known: version, log_level, socket, socket_group, metering_ca_file, "
            "metering_max_request_bytes, metering_max_connections, "
            "metering_max_connections_per_agent, metering_header_timeout_secs, "
            "metering_relay_scheduling, "
            "stop_timeout_secs, max_instances, retention_*, max_streams, api_idle_timeout_secs, "
            "memory_trim_idle_secs, "
            "metrics_listen, otlp_*";
  return Cat("unknown key '", name, "' (", known, ")");
}

}  // namespace

absl::Status ApplyConfigFile(const std::string& path, bool required, DaemonOptions& options) {
  absl::StatusOr<std::string> text = fs::ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == absl::StatusCode::kNotFound && !required) {
      return absl::OkStatus();
    }
    return text.status();
  }
  if (std::optional<contract::TomlTooDeep> deep = contract::FindTooDeepNesting(*text)) {
    return BadOption(Cat(path, ":", deep->line, ": ", deep->message));
  }
  toml::parse_result parsed = toml::parse(*text, path);
  if (!parsed) {
    const toml::parse_error& error = parsed.error();
    return BadOption(Cat(path, ":", error.source().begin.line, ":", error.source().begin.column,
                         ": ", std::string(error.description())));
  }
  for (const auto& [key, node] : parsed.table()) {
    const std::string_view name(key.str().data(), key.str().size());
    const auto entry = Keys().find(name);
    std::string problem = entry == Keys().end() ? UnknownKey(name) : entry->second(node, options);
    if (!problem.empty()) {
      return BadOption(
          Cat(path, ":", node.source().begin.line, ":", node.source().begin.column, ": ", problem));
    }
  }
  return absl::OkStatus();
}

}  // namespace ktesio::daemon
