#pragma once

// ktesiod's command line and optional config file (ktesiod.toml).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "paths/paths.h"
#include "telemetry/otlp_config.h"

namespace ktesio::daemon {

struct DaemonOptions {
  PathOverrides paths;
  std::string log_level = "info";  // trace|debug|info|warn|error|off
  std::string socket_group;        // system mode: group allowed on the socket ("ktesio")
  std::string config_socket;       // `socket` from ktesiod.toml (below --socket and KTESIO_SOCKET)
  std::string metering_ca_file;    // extra trust anchors for https upstreams
  uint64_t metering_max_request_bytes = 32u << 20;  // request bodies above this get 413
  // Metering proxy connection caps (docs/metering.md "Connection limits").
  uint32_t metering_max_connections = 4096;           // over every listener
  uint32_t metering_max_connections_per_agent = 256;  // per instance's listener
  uint32_t metering_header_timeout_secs = 30;         // a request head must arrive within
  // The metering proxy thread's scheduling on Linux: SCHED_BATCH (true, "batch") or the daemon's
  // own policy (false, "normal"); docs/metering.md "Scheduling".
  bool metering_relay_batch = true;
  uint32_t stop_timeout_secs = 30;  // graceful stop window when a command names none
  uint64_t max_instances = 10000;   // registrations beyond this are refused
  uint32_t max_streams = 1024;      // concurrent event subscriptions + log follows
  // An API connection without a call for this long is sent away (its client reconnects).
  uint32_t api_idle_timeout_secs = 60;
  // Retention (docs/operations.md "Retention"); 0 = keep forever / no count limit.
  int64_t retention_events_secs = 90 * 86400;
  int64_t retention_events_max = 1'000'000;
  int64_t retention_audit_secs = 365 * 86400;
  int64_t retention_ledger_secs = 90 * 86400;
  int64_t retention_interval_secs = 600;
  // An idle daemon returns the code and heap it is not using after this many seconds without
  // an API call (docs/operations.md "Memory when idle"); 0 = never.
  uint32_t memory_trim_idle_secs = 30;
  std::string metrics_listen;        // the metrics endpoint's address; "" = off (docs/fleet.md)
  telemetry::OtlpFileSettings otlp;  // the otlp_* keys (the OTEL_* environment wins)
  bool check = false;                // --check: inspect the store and state dir, then exit
  std::string restore_from;          // --restore FILE: put a backup in place of state.db, then exit
  bool show_help = false;
  bool show_version = false;
  bool log_level_from_flag = false;
  bool socket_group_from_flag = false;
  bool metrics_listen_from_flag = false;
};

// Parses argv (without argv[0]). Errors: INVALID_ARGUMENT naming the bad flag.
absl::StatusOr<DaemonOptions> ParseDaemonFlags(const std::vector<std::string>& args);

// Applies ktesiod.toml at `path` (schema: docs/operations.md) under the flags, which win.
// A missing file is fine unless `required`. Errors: INVALID_ARGUMENT with file:line:column for
// syntax errors, unknown keys or bad values; NOT_FOUND when required and missing.
absl::Status ApplyConfigFile(const std::string& path, bool required, DaemonOptions& options);

// INVALID_ARGUMENT with `message`: how every flag and ktesiod.toml problem is reported.
absl::Status BadOption(std::string_view message);
// trace|debug|info|warn|error|off.
bool ValidLogLevel(std::string_view level);

extern const char kDaemonUsage[];

}  // namespace ktesio::daemon
