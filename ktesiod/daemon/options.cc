#include "daemon/options.h"

#include <map>

#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

#include "absl/strings/str_cat.h"
#include "fs/fs.h"
#include "ktesio/contract/error.h"
#include "paths/paths.h"
#include "telemetry/metrics_server.h"

namespace ktesio::daemon {
namespace {

namespace reason = contract::reason;

absl::Status Bad(std::string_view message) {
  return contract::MakeError(absl::StatusCode::kInvalidArgument, reason::kInvalidArgument, message);
}

bool ValidLogLevel(std::string_view level) {
  for (std::string_view known : {"trace", "debug", "info", "warn", "error", "off"}) {
    if (level == known) {
      return true;
    }
  }
  return false;
}

}  // namespace

const char kDaemonUsage[] =
    "usage: ktesiod [--state-dir DIR] [--socket PATH] [--config FILE] [--system]\n"
    "               [--socket-group GROUP] [--log-level LEVEL] [--metrics-listen ADDR]\n"
    "               [--version] [--help]\n"
    "       ktesiod --check [--state-dir DIR | --system]\n"
    "       ktesiod --restore BACKUP [--state-dir DIR | --system]\n"
    "\n"
    "Runs the Ktesio daemon in the foreground, logging to stderr.\n"
    "  --state-dir DIR     state directory (default $XDG_DATA_HOME/ktesio, or /var/lib/ktesio\n"
    "                      with --system; env KTESIO_STATE_DIR)\n"
    "  --socket PATH       API socket (default $XDG_RUNTIME_DIR/ktesio/ktesiod.sock, or\n"
    "                      /run/ktesio/ktesiod.sock with --system; env KTESIO_SOCKET)\n"
    "  --config FILE       daemon config (default <state>/ktesiod.toml, or\n"
    "                      /etc/ktesio/ktesiod.toml with --system)\n"
    "  --system            system-service mode: system paths, socket 0660 with a group\n"
    "  --socket-group G    group allowed to use the socket in system mode (default ktesio)\n"
    "  --log-level LEVEL   trace|debug|info|warn|error|off (default info)\n"
    "  --metrics-listen ADDR  serve Prometheus metrics on 127.0.0.1:PORT, [::1]:PORT,\n"
    "                      unix:/path or (with a warning) any IP:PORT; port 0 picks one\n"
    "                      (default off; ktesiod.toml metrics_listen)\n"
    "  --check             read-only: check the store's integrity and schema and the state dir\n"
    "                      (orphaned or missing agent homes), print a report, exit 0 if fine\n"
    "  --restore BACKUP    put BACKUP (from `ktctl daemon backup`) in place of state.db while no\n"
    "                      daemon runs on the state dir; the replaced store is kept; then exit\n";

absl::StatusOr<DaemonOptions> ParseDaemonFlags(const std::vector<std::string>& args) {
  DaemonOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    bool has_inline = false;
    if (size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_inline = true;
    }
    auto take = [&]() -> absl::StatusOr<std::string> {
      if (has_inline) {
        return value;
      }
      if (i + 1 >= args.size()) {
        return Bad(absl::StrCat("flag ", flag, " needs a value"));
      }
      return args[++i];
    };
    absl::StatusOr<std::string> taken;
    if (flag == "--help" || flag == "-h") {
      options.show_help = true;
    } else if (flag == "--version") {
      options.show_version = true;
    } else if (flag == "--system") {
      options.paths.system_mode = true;
    } else if (flag == "--check") {
      options.check = true;
    } else if (flag == "--restore") {
      if (!(taken = take()).ok()) {
        return taken.status();
      }
      if (taken->empty()) {
        return Bad("flag --restore needs a backup file");
      }
      options.restore_from = *taken;
    } else if (flag == "--state-dir" || flag == "--socket" || flag == "--config" ||
               flag == "--log-level" || flag == "--socket-group" || flag == "--metrics-listen") {
      if (!(taken = take()).ok()) {
        return taken.status();
      }
      if (taken->empty()) {
        return Bad(absl::StrCat("flag ", flag, " needs a non-empty value"));
      }
      if (flag == "--state-dir") {
        options.paths.state_dir = *taken;
      } else if (flag == "--socket") {
        options.paths.socket_path = *taken;
      } else if (flag == "--config") {
        options.paths.config_path = *taken;
      } else if (flag == "--socket-group") {
        options.socket_group = *taken;
        options.socket_group_from_flag = true;
      } else if (flag == "--metrics-listen") {
        if (absl::StatusOr<telemetry::ListenAddress> address =
                telemetry::ParseListenAddress(*taken);
            !address.ok()) {
          return Bad(absl::StrCat("flag --metrics-listen: ", address.status().message()));
        }
        options.metrics_listen = *taken;
        options.metrics_listen_from_flag = true;
      } else {
        if (!ValidLogLevel(*taken)) {
          return Bad(
              absl::StrCat("unknown log level '", *taken, "' (trace|debug|info|warn|error|off)"));
        }
        options.log_level = *taken;
        options.log_level_from_flag = true;
      }
    } else {
      return Bad(absl::StrCat("unknown argument '", args[i], "' (see ktesiod --help)"));
    }
  }
  if (options.check && !options.restore_from.empty()) {
    return Bad("--check and --restore cannot be combined");
  }
  return options;
}

absl::Status ApplyConfigFile(const std::string& path, bool required, DaemonOptions& options) {
  absl::StatusOr<std::string> text = fs::ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == absl::StatusCode::kNotFound && !required) {
      return absl::OkStatus();
    }
    return text.status();
  }
  toml::parse_result parsed = toml::parse(*text, path);
  if (!parsed) {
    const toml::parse_error& error = parsed.error();
    return Bad(absl::StrCat(path, ":", error.source().begin.line, ":", error.source().begin.column,
                            ": ", std::string(error.description())));
  }
  const toml::table& table = parsed.table();
  for (const auto& [key, node] : table) {
    auto where = [&, &node = node] {
      return absl::StrCat(path, ":", node.source().begin.line, ":", node.source().begin.column);
    };
    std::string_view name = key.str();
    if (name == "version") {
      std::optional<int64_t> version = node.value<int64_t>();
      if (!version || *version != 1) {
        return Bad(absl::StrCat(where(), ": 'version' must be 1"));
      }
    } else if (name == "log_level" || name == "socket_group") {
      std::optional<std::string> value = node.value<std::string>();
      if (!value) {
        return Bad(absl::StrCat(where(), ": '", std::string(name), "' must be a string"));
      }
      if (name == "log_level") {
        if (!ValidLogLevel(*value)) {
          return Bad(absl::StrCat(where(), ": unknown log level '", *value, "'"));
        }
        if (!options.log_level_from_flag) {
          options.log_level = *value;
        }
      } else if (!options.socket_group_from_flag) {
        options.socket_group = *value;
      }
    } else if (name == "socket") {
      std::optional<std::string> value = node.value<std::string>();
      if (!value || value->empty() || value->front() != '/') {
        return Bad(absl::StrCat(where(), ": 'socket' must be an absolute path"));
      }
      if (absl::Status status = ValidateSocketPath(*value); !status.ok()) {
        return Bad(absl::StrCat(where(), ": ", std::string(status.message())));
      }
      options.config_socket = *value;
    } else if (name == "metrics_listen") {
      std::optional<std::string> value = node.value<std::string>();
      if (!value) {
        return Bad(absl::StrCat(where(), ": 'metrics_listen' must be a string"));
      }
      if (!value->empty()) {  // "" turns the endpoint off
        if (absl::StatusOr<telemetry::ListenAddress> address =
                telemetry::ParseListenAddress(*value);
            !address.ok()) {
          return Bad(absl::StrCat(where(), ": ", address.status().message()));
        }
      }
      if (!options.metrics_listen_from_flag) {
        options.metrics_listen = *value;
      }
    } else if (name.substr(0, 5) == "otlp_") {
      std::string* target = name == "otlp_endpoint"              ? &options.otlp.endpoint
                            : name == "otlp_metrics_endpoint"    ? &options.otlp.metrics_endpoint
                            : name == "otlp_headers"             ? &options.otlp.headers
                            : name == "otlp_protocol"            ? &options.otlp.protocol
                            : name == "otlp_service_name"        ? &options.otlp.service_name
                            : name == "otlp_resource_attributes" ? &options.otlp.resource_attributes
                            : name == "otlp_export_interval_ms"  ? &options.otlp.export_interval_ms
                            : name == "otlp_export_timeout_ms"   ? &options.otlp.export_timeout_ms
                                                                 : nullptr;
      if (target == nullptr) {
        return Bad(absl::StrCat(where(), ": unknown key '", std::string(name),
                                "' (known otlp_ keys: otlp_endpoint, otlp_metrics_endpoint, "
                                "otlp_headers, otlp_protocol, otlp_service_name, "
                                "otlp_resource_attributes, otlp_export_interval_ms, "
                                "otlp_export_timeout_ms)"));
      }
      if (name == "otlp_export_interval_ms" || name == "otlp_export_timeout_ms") {
        std::optional<int64_t> value = node.value_exact<int64_t>();
        if (!value) {
          return Bad(absl::StrCat(where(), ": '", std::string(name), "' must be an integer"));
        }
        *target = std::to_string(*value);
      } else {
        std::optional<std::string> value = node.value<std::string>();
        if (!value) {
          return Bad(absl::StrCat(where(), ": '", std::string(name), "' must be a string"));
        }
        *target = *value;
      }
    } else if (name == "metering_ca_file") {
      std::optional<std::string> value = node.value<std::string>();
      if (!value || value->empty() || value->front() != '/') {
        return Bad(absl::StrCat(where(), ": 'metering_ca_file' must be an absolute path"));
      }
      options.metering_ca_file = *value;
    } else if (name == "metering_max_request_bytes") {
      std::optional<int64_t> value = node.value<int64_t>();
      if (!value || *value < 1024 || *value > (int64_t{1} << 32)) {
        return Bad(absl::StrCat(where(),
                                ": 'metering_max_request_bytes' must be an integer from 1024 "
                                "to 4294967296"));
      }
      options.metering_max_request_bytes = static_cast<uint64_t>(*value);
    } else if (name == "metering_max_connections" || name == "metering_max_connections_per_agent" ||
               name == "metering_header_timeout_secs") {
      const int64_t max = name == "metering_header_timeout_secs" ? 3600 : 1000000;
      std::optional<int64_t> value = node.value_exact<int64_t>();
      if (!value || *value < 1 || *value > max) {
        return Bad(absl::StrCat(where(), ": '", std::string(name),
                                "' must be an integer from 1 to ", max));
      }
      const auto v = static_cast<uint32_t>(*value);
      if (name == "metering_max_connections") {
        options.metering_max_connections = v;
      } else if (name == "metering_max_connections_per_agent") {
        options.metering_max_connections_per_agent = v;
      } else {
        options.metering_header_timeout_secs = v;
      }
    } else if (name.starts_with("retention_")) {
      static const std::map<std::string_view, std::pair<int64_t DaemonOptions::*, int64_t>> kKeys =
          {
              {"retention_events_secs", {&DaemonOptions::retention_events_secs, 0}},
              {"retention_events_max", {&DaemonOptions::retention_events_max, 0}},
              {"retention_audit_secs", {&DaemonOptions::retention_audit_secs, 0}},
              {"retention_ledger_secs", {&DaemonOptions::retention_ledger_secs, 0}},
              {"retention_interval_secs", {&DaemonOptions::retention_interval_secs, 1}},
          };
      const auto spec = kKeys.find(std::string_view(name.data(), name.size()));
      if (spec == kKeys.end()) {
        return Bad(absl::StrCat(where(), ": unknown key '", std::string(name),
                                "' (retention keys: retention_events_secs, retention_events_max, "
                                "retention_audit_secs, retention_ledger_secs, "
                                "retention_interval_secs)"));
      }
      constexpr int64_t kMax = int64_t{1} << 40;
      std::optional<int64_t> value = node.value_exact<int64_t>();
      if (!value || *value < spec->second.second || *value > kMax) {
        return Bad(absl::StrCat(where(), ": '", std::string(name), "' must be an integer from ",
                                spec->second.second, " to ", kMax,
                                spec->second.second == 0 ? " (0 = no limit)" : ""));
      }
      options.*(spec->second.first) = *value;
    } else if (name == "stop_timeout_secs" || name == "max_instances" || name == "max_streams") {
      struct Range {
        int64_t min;
        int64_t max;
      };
      const Range range = name == "stop_timeout_secs" ? Range{0, 86400}
                          : name == "max_instances"   ? Range{1, 1000000}
                                                      : Range{1, 100000};
      std::optional<int64_t> value = node.value_exact<int64_t>();
      if (!value || *value < range.min || *value > range.max) {
        return Bad(absl::StrCat(where(), ": '", std::string(name), "' must be an integer from ",
                                range.min, " to ", range.max));
      }
      if (name == "stop_timeout_secs") {
        options.stop_timeout_secs = static_cast<uint32_t>(*value);
      } else if (name == "max_instances") {
        options.max_instances = static_cast<uint64_t>(*value);
      } else {
        options.max_streams = static_cast<uint32_t>(*value);
      }
    } else {
      return Bad(
          absl::StrCat(where(), ": unknown key '", std::string(name),
                       "' (known: version, log_level, socket, socket_group, metering_ca_file, "
                       "metering_max_request_bytes, metering_max_connections, "
                       "metering_max_connections_per_agent, metering_header_timeout_secs, "
                       "stop_timeout_secs, max_instances, retention_*, "
                       "max_streams, metrics_listen, otlp_*)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ktesio::daemon
