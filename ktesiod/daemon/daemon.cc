#include "daemon/daemon.h"

#include <grp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/request_counter.h"
#include "api/services.h"
#include "daemon/metrics.h"
#include "engine/engine.h"
#include "fs/fs.h"
#include "grpc/support/log.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "ktesio/contract/declaration.h"
#include "ktesio/contract/limits.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/v1/version.h"
#include "memory/trim.h"
#include "server/instance_lock.h"
#include "server/listener.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"
#include "telemetry/otlp_exporter.h"

namespace ktesio::daemon {
namespace {

std::shared_ptr<spdlog::logger> MakeLogger(const std::string& name, const std::string& level) {
  static auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>(name, sink);
  logger->set_level(spdlog::level::from_str(level));
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %n: %v", spdlog::pattern_time_type::utc);
  return logger;
}

absl::StatusOr<std::optional<gid_t>> ResolveGroup(const DaemonOptions& options) {
  if (!options.paths.system_mode) {
    return std::optional<gid_t>();
  }
  std::string name = options.socket_group.empty() ? "ktesio" : options.socket_group;
  // A numeric GID is taken as is (it need not have a group entry, as with any chown).
  uint32_t numeric = 0;
  if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos &&
      absl::SimpleAtoi(name, &numeric) && numeric != static_cast<uint32_t>(-1)) {
    return std::optional<gid_t>(static_cast<gid_t>(numeric));
  }
  group grp{};
  group* result = nullptr;
  std::vector<char> buffer(16384);
  if (getgrnam_r(name.c_str(), &grp, buffer.data(), buffer.size(), &result) != 0 ||
      result == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket group '", name,
                     "' does not exist; create it (packaging/systemd/ktesio.sysusers "
                     "does) or pass --socket-group"));
  }
  return std::optional<gid_t>(grp.gr_gid);
}

// SIGHUP: re-reads ktesiod.toml. `log_level` (unless --log-level pinned it) and the limits
// apply at once; the other keys are read at start only, so a change is reported, not applied. A
// file that no longer parses changes nothing.
engine::EngineLimits LimitsOf(const DaemonOptions& options) {
  engine::EngineLimits limits;
  limits.stop_timeout_seconds = options.stop_timeout_secs;
  limits.max_instances = options.max_instances;
  limits.max_streams = options.max_streams;
  limits.retention.events_secs = options.retention_events_secs;
  limits.retention.events_max = options.retention_events_max;
  limits.retention.audit_secs = options.retention_audit_secs;
  limits.retention.ledger_secs = options.retention_ledger_secs;
  limits.retention.interval_secs = options.retention_interval_secs;
  return limits;
}

void Reload(const DaemonOptions& flags, const DaemonPaths& paths, DaemonOptions& running,
            const std::vector<std::shared_ptr<spdlog::logger>>& loggers, engine::Engine& engine) {
  const std::shared_ptr<spdlog::logger>& log = loggers.front();
  DaemonOptions fresh = flags;
  if (absl::Status status =
          ApplyConfigFile(paths.config_path, !flags.paths.config_path.empty(), fresh);
      !status.ok()) {
    log->error("reload refused, running settings kept: {}", std::string(status.message()));
    return;
  }
  if (fresh.log_level != running.log_level) {
    for (const auto& logger : loggers) {
      logger->set_level(spdlog::level::from_str(fresh.log_level));
    }
    log->warn("reload: log_level {} -> {}", running.log_level, fresh.log_level);
    running.log_level = fresh.log_level;
  }
  // The limits apply at once, on the engine's thread.
  auto live = [&](std::string_view key, uint64_t before, uint64_t after) {
    if (before != after) {
      log->warn("reload: {} {} -> {}", std::string(key), before, after);
    }
  };
  live("stop_timeout_secs", running.stop_timeout_secs, fresh.stop_timeout_secs);
  live("max_instances", running.max_instances, fresh.max_instances);
  live("max_streams", running.max_streams, fresh.max_streams);
  running.stop_timeout_secs = fresh.stop_timeout_secs;
  running.max_instances = fresh.max_instances;
  running.max_streams = fresh.max_streams;
  engine.Post([&engine, limits = LimitsOf(fresh)] { engine.SetLimits(limits); });
  auto restart_only = [&](std::string_view key, bool changed) {
    if (changed) {
      log->warn("reload: '{}' changed in {}; it takes effect at the next daemon start",
                std::string(key), paths.config_path);
    }
  };
  restart_only("socket", fresh.config_socket != running.config_socket);
  restart_only("socket_group", fresh.socket_group != running.socket_group);
  restart_only("metering_ca_file", fresh.metering_ca_file != running.metering_ca_file);
  restart_only("metrics_listen", fresh.metrics_listen != running.metrics_listen);
  restart_only("api_idle_timeout_secs",
               fresh.api_idle_timeout_secs != running.api_idle_timeout_secs);
  restart_only("memory_trim_idle_secs",
               fresh.memory_trim_idle_secs != running.memory_trim_idle_secs);
  restart_only("otlp_*", !(fresh.otlp == running.otlp));
  restart_only("metering_max_request_bytes",
               fresh.metering_max_request_bytes != running.metering_max_request_bytes);
  restart_only(
      "metering_max_connections",
      fresh.metering_max_connections != running.metering_max_connections ||
          fresh.metering_max_connections_per_agent != running.metering_max_connections_per_agent ||
          fresh.metering_header_timeout_secs != running.metering_header_timeout_secs);
  restart_only("metering_relay_scheduling",
               fresh.metering_relay_batch != running.metering_relay_batch);
  struct stat config_stat {};
  if (stat(paths.config_path.c_str(), &config_stat) == 0) {
    log->info("reload: {} read", paths.config_path);
  } else {
    log->warn("reload: no {}: the defaults apply", paths.config_path);  // worth seeing
  }
}

}  // namespace

// Raises the soft descriptor limit to the hard one, so the daemon has what the operator (or
// systemd's LimitNOFILE) granted. Returns the soft limit in force.
static uint64_t RaiseDescriptorLimit(spdlog::logger& log) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return 1024;
  }
  if (limit.rlim_cur < limit.rlim_max) {
    const rlim_t before = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      log.warn("could not raise the descriptor limit from {} to {}: {}", before, limit.rlim_max,
               std::strerror(errno));
      limit.rlim_cur = before;
    }
  }
  return limit.rlim_cur;
}

// The metering proxy's connection caps: as configured, but never so many that proxied
// connections (a client and an upstream descriptor each) could eat the descriptors the API
// socket, the store, logs and agent launches need: a quarter of the limit, at least 128, stays
// in reserve.
static metering::AdmissionLimits ProxyAdmission(const DaemonOptions& options, spdlog::logger& log) {
  const uint64_t soft = RaiseDescriptorLimit(log);
  const uint64_t reserve = std::max<uint64_t>(128, soft / 4);
  const uint64_t fit = soft > reserve ? (soft - reserve) / 2 : 1;
  metering::AdmissionLimits limits;
  limits.total = static_cast<size_t>(
      std::max<uint64_t>(1, std::min<uint64_t>(options.metering_max_connections, fit)));
  limits.per_instance = std::min<size_t>(options.metering_max_connections_per_agent, limits.total);
  if (limits.total < options.metering_max_connections) {
    log.info("metering proxy connections capped at {} (descriptor limit {}, {} kept in reserve)",
             limits.total, soft, reserve);
  }
  return limits;
}

namespace {

// What the daemon settles before it opens anything: the flags under ktesiod.toml, the paths,
// the OTLP settings and the socket group.
struct Settled {
  DaemonOptions options;
  DaemonPaths paths;
  telemetry::OtlpConfig otlp;
  std::optional<gid_t> group;
};

// Settles the start-up; nullopt after logging why, with `exit_code` 2 for a refused
// configuration and 1 for anything else.
std::optional<Settled> Settle(const DaemonOptions& flags, spdlog::logger& log, int& exit_code) {
  Settled settled;
  settled.options = flags;
  DaemonOptions& options = settled.options;
  exit_code = 2;
  absl::StatusOr<DaemonPaths> paths = ResolveDaemonPaths(options.paths, ProcessEnvironment());
  if (!paths.ok()) {
    log.error("start failed: {}", std::string(paths.status().message()));
    return std::nullopt;
  }
  settled.paths = std::move(*paths);
  if (absl::Status status =
          ApplyConfigFile(settled.paths.config_path, !options.paths.config_path.empty(), options);
      !status.ok()) {
    log.error("config refused: {}", std::string(status.message()));
    return std::nullopt;
  }
  // `socket` in the file counts only when neither --socket nor KTESIO_SOCKET chose one.
  if (!options.config_socket.empty() && flags.paths.socket_path.empty() &&
      ProcessEnvironment().Get("KTESIO_SOCKET").empty()) {
    settled.paths.socket_path = options.config_socket;
  }
  log.set_level(spdlog::level::from_str(options.log_level));
  absl::StatusOr<telemetry::OtlpConfig> otlp =
      telemetry::ResolveOtlp(options.otlp, [](const char* name) {
        const char* value = std::getenv(name);
        return value == nullptr ? std::string() : std::string(value);
      });
  if (!otlp.ok()) {
    log.error("config refused: {}", std::string(otlp.status().message()));
    return std::nullopt;
  }
  settled.otlp = std::move(*otlp);
  exit_code = 1;
  absl::StatusOr<std::optional<gid_t>> group = ResolveGroup(options);
  if (!group.ok()) {
    log.error("start failed: {}", std::string(group.status().message()));
    return std::nullopt;
  }
  settled.group = *group;
  return settled;
}

engine::EngineOptions EngineOptionsOf(const DaemonOptions& options, spdlog::logger& log) {
  engine::EngineOptions engine_options;
  engine_options.proxy.ca_file = options.metering_ca_file;
  engine_options.proxy.max_request_bytes = options.metering_max_request_bytes;
  engine_options.proxy.header_timeout = std::chrono::seconds(options.metering_header_timeout_secs);
  engine_options.proxy.batch_scheduling = options.metering_relay_batch;
  engine_options.proxy.admission = ProxyAdmission(options, log);
  engine_options.limits = LimitsOf(options);
  return engine_options;
}

// The metrics endpoint and the OTLP exporter, when configured.
struct Telemetry {
  std::unique_ptr<telemetry::MetricsServer> metrics;
  std::unique_ptr<telemetry::OtlpExporter> exporter;
};

absl::StatusOr<Telemetry> StartTelemetry(const Settled& settled, engine::Engine& engine,
                                         api::RequestCounter& requests, spdlog::logger& log) {
  const DaemonOptions& options = settled.options;
  Telemetry telemetry;
  if (!options.metrics_listen.empty()) {
    KT_ASSIGN_OR_RETURN(telemetry.metrics, StartMetrics(options.metrics_listen, engine, requests,
                                                        MakeLogger("metrics", options.log_level)));
    engine.set_metrics_address(telemetry.metrics->address());
  }
  if (!settled.otlp.unsupported.empty()) {
    log.error("{}", settled.otlp.unsupported);
    engine.health().Set("otlp", settled.otlp.unsupported);
  } else if (settled.otlp.enabled) {
    auto otlp_log = MakeLogger("otlp", options.log_level);
    KT_ASSIGN_OR_RETURN(
        telemetry.exporter,
        telemetry::OtlpExporter::Start(
            settled.otlp,
            [&engine, &requests, otlp_log] { return CollectSnapshot(engine, requests, *otlp_log); },
            otlp_log));
  }
  return telemetry;
}

absl::StatusOr<std::unique_ptr<server::Listener>> OpenListener(const Settled& settled,
                                                               spdlog::logger& log) {
  if (std::optional<int> inherited = server::InheritedListenFd(); inherited.has_value()) {
    log.info("serving on the socket passed by the service manager (LISTEN_FDS) path={}",
             settled.paths.socket_path);
    return server::Listener::Adopt(*inherited, settled.paths.socket_path);
  }
  return server::Listener::Bind(settled.paths.socket_path, settled.group.has_value() ? 0660 : 0600,
                                settled.group);
}

// The gRPC services over one API context, and the server running them. Members in this order:
// the services refer to the context and must outlive the server.
class ApiServer {
 public:
  explicit ApiServer(api::ApiContext context)
      : context_(std::move(context)),
        system_(context_),
        agent_(context_),
        log_(context_),
        config_(context_),
        secret_(context_),
        event_(context_),
        fleet_(context_) {}

  // Builds and starts the server with the request counter's interceptor. Errors: INTERNAL.
  absl::Status Start(api::RequestCounter& requests, uint32_t api_idle_timeout_secs) {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    builder.SetMaxReceiveMessageSize(static_cast<int>(contract::kMaxRequestBytes));
    // Connections hold descriptors, and this gRPC neither caps their number nor, by default,
    // ends a silent one: one without a call for api_idle_timeout_secs is sent away, whatever it
    // sent (nothing, half a preface, a whole one). A client reconnects at its next call; a stream
    // being followed is a call, so never idle.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               static_cast<int>(api_idle_timeout_secs * 1000));
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> counting;
    counting.push_back(requests.Factory());
    builder.experimental().SetInterceptorCreators(std::move(counting));
    for (grpc::Service* service : std::initializer_list<grpc::Service*>{
             &system_, &agent_, &log_, &config_, &secret_, &event_, &fleet_}) {
      builder.RegisterService(service);
    }
    server_ = builder.BuildAndStart();
    if (server_ == nullptr) {
      return absl::InternalError("cannot start the gRPC server");
    }
    // "" (the daemon) is SERVING while it answers; the agent service is NOT_SERVING while the
    // daemon is degraded (e.g. ktesio-shim missing: agents cannot start).
    grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
    context_.engine->health().SetObserver([health](bool degraded) {
      health->SetServingStatus(std::string(v1::AgentService::service_full_name()), !degraded);
    });
    return absl::OkStatus();
  }

  grpc::Server* server() { return server_.get(); }
  const std::shared_ptr<spdlog::logger>& logger() const { return context_.logger; }

 private:
  api::ApiContext context_;
  api::SystemServiceImpl system_;
  api::AgentServiceImpl agent_;
  api::LogServiceImpl log_;
  api::ConfigServiceImpl config_;
  api::SecretServiceImpl secret_;
  api::EventServiceImpl event_;
  api::FleetServiceImpl fleet_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace

int RunDaemon(const DaemonOptions& flags, platform::ServiceHost& host) {
  // Everything the daemon creates (state.db, logs, rendered files) is owner-only by default.
  umask(0077);
  auto log = MakeLogger("ktesiod", flags.log_level);
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);
  int exit_code = 1;
  std::optional<Settled> settled = Settle(flags, *log, exit_code);
  if (!settled.has_value()) {
    return exit_code;
  }
  DaemonOptions& options = settled->options;
  const DaemonPaths& paths = settled->paths;
  auto failed = [&log](std::string_view what, const absl::Status& status) {
    log->error("{}: {}", what, std::string(status.message()));
    return 1;
  };
  if (absl::Status status = fs::MakeDirs(paths.state_dir, 0700, true); !status.ok()) {
    return failed("start failed", status);
  }
  absl::StatusOr<std::unique_ptr<server::InstanceLock>> lock =
      server::InstanceLock::Acquire(paths.state_dir);
  if (!lock.ok()) {
    return failed("start refused", lock.status());
  }
  auto engine_log = MakeLogger("engine", options.log_level);
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(paths, engine_log, EngineOptionsOf(options, *log));
  if (!engine.ok()) {
    return failed("start failed", engine.status());
  }
  // The metrics endpoint is bound before the API socket: a client that reaches the socket never
  // meets a daemon about to fail on its metrics address.
  api::RequestCounter requests;
  absl::StatusOr<Telemetry> telemetry = StartTelemetry(*settled, **engine, requests, *log);
  if (!telemetry.ok()) {
    return failed("start failed", telemetry.status());
  }
  absl::StatusOr<std::unique_ptr<server::Listener>> listener = OpenListener(*settled, *log);
  if (!listener.ok()) {
    return failed("start failed", listener.status());
  }
  server::PeerTable peers;
  ApiServer api(api::ApiContext{
      engine->get(), &peers, {geteuid(), settled->group}, MakeLogger("api", options.log_level)});
  if (absl::Status status = api.Start(requests, options.api_idle_timeout_secs); !status.ok()) {
    return failed("start failed", status);
  }
  (*engine)->Start();
  (*listener)->Serve(api.server(), &peers);
  log->info("ready version={} api={} contract={} pid={} state_dir={} socket={} mode={}",
            std::string(v1::kKtesioVersion), std::string(v1::kApiVersion),
            std::string(contract::kContractVersion), getpid(), paths.state_dir, paths.socket_path,
            paths.system_mode ? "system" : "user");
  host.ReportReady();
  std::optional<memory::IdleTrimmer> trimmer;
  if (options.memory_trim_idle_secs > 0) {
    // Boot's work is done when the engine reaches this, queued behind the reconciliation Start()
    // posted; a second later the launches it began are through, and the code only start-up ran
    // is unmapped (it stays in the page cache; see memory::ReleaseCode).
    auto reconciled = std::make_shared<std::atomic<bool>>(false);
    (*engine)->Post([reconciled] { reconciled->store(true); });
    trimmer.emplace(
        absl::Seconds(options.memory_trim_idle_secs),
        [&requests] {
          return memory::Activity{requests.Started(), requests.InFlight()};
        },
        [reconciled] { return reconciled->load(); }, absl::Seconds(1), log);
  }

  while (host.WaitForControl() == platform::Control::kReload) {
    Reload(flags, paths, options, {log, engine_log, api.logger()}, **engine);
  }
  log->info("shutdown signal={}", std::string(host.LastControlSource()));
  host.ReportStopping();
  trimmer.reset();
  (*listener)->Shutdown();
  telemetry->metrics.reset();  // before the engine stops: a scrape (or an export) waits on it
  telemetry->exporter.reset();
  (*engine)->AnswerWaitersAtShutdown();  // a long stop window must not hold the shutdown
  api.server()->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  (*engine)->Stop();
  log->info("stopped");
  return 0;
}

}  // namespace ktesio::daemon
