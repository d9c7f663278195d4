#include "engine/engine.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/proxy_path.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "process/shim_backend.h"

namespace ktesio::daemon::engine {

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const DaemonPaths& paths,
                                                       std::shared_ptr<spdlog::logger> logger,
                                                       EngineOptions options) {
  KT_ASSIGN_OR_RETURN(std::unique_ptr<store::Store> store,
                      store::Store::Open(paths.state_dir + "/state.db"));
  KT_ASSIGN_OR_RETURN(ProxyKey key, LoadProxyKey(paths.state_dir));
  std::unique_ptr<Engine> engine(
      new Engine(paths, std::move(store), logger, std::move(options.seams)));
  engine->proxy_key_ = std::move(key);
  Engine* raw = engine.get();
  absl::StatusOr<std::unique_ptr<metering::MeteringProxy>> proxy = metering::MeteringProxy::Create(
      std::move(options.proxy),
      [raw](std::vector<metering::CallRecord> records) { raw->calls_.Queue(std::move(records)); },
      logger);
  if (!proxy.ok()) {
    return proxy.status();
  }
  engine->proxy_ = std::move(*proxy);
  engine->SetLimits(options.limits);
  return engine;
}

Engine::Engine(DaemonPaths paths, std::unique_ptr<store::Store> store,
               std::shared_ptr<spdlog::logger> logger, EngineSeams seams)
    : paths_(std::move(paths)),
      log_(std::move(logger)),
      store_(std::move(store)),
      registry_(*store_, paths_.state_dir, [this] { return clock_->NowUnixMs(); }),
      config_(paths_.state_dir),
      work_(boost::asio::make_work_guard(io_)),
      clock_(seams.clock ? seams.clock(io_) : std::make_unique<time::SystemClock>(io_)),
      backend_(seams.backend ? seams.backend(io_)
                             : std::make_unique<process::ShimBackend>(
                                   io_, process::LocateShim, process::ShimStart::kLauncher, log_)),
      supervisor_(io_, *store_, *backend_, *clock_, log_,
                  supervisor::Hooks{
                      [this](const store::InstanceRow& row) { return config_.Settings(row); },
                      [this](const store::InstanceRow& row, const v1::AdapterSnapshot& snapshot) {
                        return DeliverFor(row, snapshot);
                      },
                      [this](const store::InstanceRow& row, supervisor::State from,
                             supervisor::State to) { OnTransition(row, from, to); },
                      [this](const std::string& instance, const std::string& problem) {
                        health_.Set("store:" + instance, problem);
                      },
                      [this](const store::InstanceRow& row, const v1::AdapterSnapshot& snapshot) {
                        return Deliverable(row, snapshot);
                      }}) {
  started_at_ms_ = clock_->NowUnixMs();
  SyncLaunchHealth();
  if (health_.degraded()) {
    log_->error("degraded: {}; agents cannot start", backend_->Problem());
  }
}

Engine::~Engine() {
  Stop();
  // Directory watches belong to io_'s inotify service; io_ is declared (and so destroyed)
  // after them, so drop them first.
  logs_.Clear();
  usage_.Clear();  // its watches and timers belong to io_ too
}

void Engine::Start() {
  Post([this] {
    supervisor_.Reconcile();
    ReopenProxies();
    if (absl::StatusOr<std::vector<store::InstanceRow>> rows = store_->ListInstances(); rows.ok()) {
      usage_.WatchLive(*rows);
    }
    ResumePendingBudgetActions();
    ScheduleRetention(std::chrono::seconds(
        std::clamp<int64_t>(limits_.retention.interval_secs, 1, 60)));  // soon after start
  });
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "kt-engine");
    io_.run();
  });
}

void Engine::Stop() {
  // Agents keep running (their shims own them); pending watches and timers are simply dropped
  // and rebuilt by the next daemon's reconciliation.
  work_.reset();
  io_.stop();
  if (thread_.joinable()) {
    thread_.join();
  }
}

absl::StatusOr<Engine::StatusReport> Engine::Status() {
  SyncLaunchHealth();
  KT_ASSIGN_OR_RETURN(std::vector<store::InstanceRow> rows, store_->ListInstances());
  SyncProxyHealth(rows);
  StatusReport report;
  report.uptime_ms = clock_->NowUnixMs() - started_at_ms_;
  report.problems = health_.Problems();
  report.instances_total = static_cast<uint32_t>(rows.size());
  for (const store::InstanceRow& row : rows) {
    report.instances_by_state[row.state] += 1;
  }
  return report;
}

void Engine::SyncLaunchHealth() { health_.Set("launch", backend_->Problem()); }

void Engine::ReportUnopenedProxies() {
  std::string problem;
  for (const auto& [name, why] : unopened_proxies_) {
    absl::StrAppend(&problem, problem.empty() ? "" : "; ", "the metering proxy of '", name,
                    "' could not be re-opened after the daemon restarted (", why,
                    "): its model calls fail, or reach whatever holds its port, until it is "
                    "restarted (ktctl agent restart ",
                    name, ")");
  }
  health_.Set("proxy-reopen", problem);
}

void Engine::SyncProxyHealth(const std::vector<store::InstanceRow>& rows) {
  // The transitions and removals drop entries as they happen; this catches anything else.
  std::erase_if(unopened_proxies_, [&](const auto& entry) {
    auto row = std::find_if(rows.begin(), rows.end(),
                            [&](const store::InstanceRow& r) { return r.name == entry.first; });
    return row == rows.end() || !supervisor::IsLive(supervisor::RowState(*row)) ||
           proxy_->Port(entry.first) != 0;
  });
  ReportUnopenedProxies();
  const metering::Admission::Pressure pressure = proxy_->Pressure();
  std::string problem;
  if (pressure.recent) {
    problem =
        absl::StrCat("metering proxy under a connection flood: ", pressure.refused_total,
                     " connections refused over the caps (per agent ", pressure.limits.per_instance,
                     ", total ", pressure.limits.total, ") and ", pressure.resource_errors_total,
                     " accepts failed for lack of descriptors since the daemon started; ",
                     pressure.open, " open now (metering_max_connections in ktesiod.toml)");
  }
  health_.Set("proxy", problem);
}

void Engine::SetLimits(const EngineLimits& limits) {
  const bool new_retention = !(limits.retention == limits_.retention);
  limits_ = limits;
  if (new_retention && thread_.joinable()) {
    ScheduleRetention(std::chrono::seconds(1));  // a new policy applies within a second
  }
  supervisor_.set_default_stop_seconds(limits.stop_timeout_seconds);
}

absl::Status Engine::CheckStreamLimit() const {
  if (events_.size() + logs_.size() >= limits_.max_streams) {
    return contract::MakeError(
        absl::StatusCode::kResourceExhausted, contract::reason::kLimitReached,
        absl::StrCat("the daemon already serves ", limits_.max_streams,
                     " event/log streams (max_streams in ktesiod.toml); end one or raise it"));
  }
  return absl::OkStatus();
}

void Engine::Forget(const std::string& name) {
  proxy_->Forget(name);  // its metrics go with it
  if (unopened_proxies_.erase(name) > 0) {
    ReportUnopenedProxies();
  }
  std::erase_if(genai_, [&](const auto& entry) { return std::get<0>(entry.first) == name; });
}

}  // namespace ktesio::daemon::engine
