#include "daemon/options.h"

#include "absl/strings/str_cat.h"
#include "fs/fs.h"
#include "ktesio/contract/error.h"
#include "paths/paths.h"
#include "telemetry/metrics_server.h"

namespace ktesio::daemon {

absl::Status BadOption(std::string_view message) {
  return contract::MakeError(absl::StatusCode::kInvalidArgument, contract::reason::kInvalidArgument,
                             message);
}

bool ValidLogLevel(std::string_view level) {
  for (std::string_view known : {"trace", "debug", "info", "warn", "error", "off"}) {
    if (level == known) {
      return true;
    }
  }
  return false;
}

namespace {

absl::Status Bad(std::string_view message) { return BadOption(message); }

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

}  // namespace ktesio::daemon
