#pragma once

// The engine: the composition root of the daemon's mutable state. It runs an Asio event loop on
// one thread and owns, on that thread, the store, the registry, the supervisor, the metering
// proxy and the owners split out of it (instances, lifecycle, configuration, usage meter, call
// recorder, event and log feeds), and wires them to each other. API handlers post work to it,
// translate their `v1` request for an owner and complete their RPC from the posted function, so
// no handler ever blocks on the engine.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "engine/call_recorder.h"
#include "engine/config_bridge.h"
#include "engine/configuration.h"
#include "engine/event_feed.h"
#include "engine/health.h"
#include "engine/instances.h"
#include "engine/lifecycle.h"
#include "engine/log_feed.h"
#include "engine/proxy_path.h"
#include "engine/usage_meter.h"
#include "fs/directory_watch.h"
#include "ktesio/v1/logs.pb.h"
#include "logs/reader.h"
#include "metering/proxy/proxy.h"
#include "paths/paths.h"
#include "process/backend.h"
#include "registry/registry.h"
#include "spdlog/logger.h"
#include "store/store.h"
#include "supervisor/supervisor.h"
#include "telemetry/metrics.h"
#include "time/clock.h"

namespace ktesio::daemon::engine {

// Operator limits from ktesiod.toml; SIGHUP applies new values at once (Engine::SetLimits).
// How long history is kept (docs/operations.md "Retention"); 0 = keep forever / no limit.
struct RetentionPolicy {
  int64_t events_secs = 90 * 86400;  // lifecycle/usage/breach events older than this go
  int64_t events_max = 1'000'000;    // and beyond this many
  int64_t audit_secs = 365 * 86400;  // audit records
  int64_t ledger_secs = 90 * 86400;  // per-call ledger detail of runs that ended this long ago
  int64_t interval_secs = 600;       // how often the pruner looks
  bool operator==(const RetentionPolicy&) const = default;
};

struct EngineLimits {
  uint32_t stop_timeout_seconds = 30;  // graceful stop window when a command names none
  uint64_t max_instances = 10000;      // registrations beyond this are refused
  uint32_t max_streams = 1024;         // concurrent event subscriptions + log follows
  RetentionPolicy retention;
};

// What the engine runs agents and reads time through. Unset = the real ones (process::ShimBackend,
// time::SystemClock); tests inject fakes. Each is built on the engine's io_context.
struct EngineSeams {
  std::function<std::unique_ptr<process::ProcessBackend>(boost::asio::io_context&)> backend;
  std::function<std::unique_ptr<time::Clock>(boost::asio::io_context&)> clock;
};

struct EngineOptions {
  metering::ProxyOptions proxy;  // the engine-observed metering proxy (CA file, body cap)
  EngineLimits limits;
  EngineSeams seams;
};

class Engine {
 public:
  // Opens the store under paths.state_dir and starts the metering proxy's thread. Errors: as
  // store::Store::Open; INVALID_ARGUMENT for an unloadable metering CA file.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const DaemonPaths& paths,
                                                        std::shared_ptr<spdlog::logger> logger,
                                                        EngineOptions options = {});
  ~Engine();

  // Starts the owner thread and reconciles instances with the OS. Stop() drains posted work.
  void Start();
  void Stop();
  // At shutdown, before the API server waits for its calls: answers every call still waiting on
  // a start or stop under way (UNAVAILABLE), which goes on and which the next daemon re-adopts.
  // Without it a shutdown waits out the longest stop window. Thread-safe.
  void AnswerWaitersAtShutdown() {
    Post([this] { supervisor_.AnswerWaitersAtShutdown(); });
  }

  // Runs `fn` on the owner thread. Thread-safe.
  template <typename Fn>
  void Post(Fn&& fn) {
    boost::asio::post(io_, std::forward<Fn>(fn));
  }

  // --- Owner-thread only below. ---

  // The completion of an asynchronous operation, called on the owner thread.
  using Finish = std::function<void(absl::Status)>;

  // The owners the API and the fleet operations speak to, in domain terms (the `v1`
  // translation is api/'s).
  Instances& instances() { return instances_; }
  Lifecycle& lifecycle() { return lifecycle_; }
  Configuration& configuration() { return configuration_; }

  // What GetStatus reports beyond the paths and versions.
  struct StatusReport {
    int64_t uptime_ms = 0;
    std::vector<std::string> problems;                   // what keeps the daemon from doing its job
    std::map<std::string, uint32_t> instances_by_state;  // wire state -> count
    uint32_t instances_total = 0;
  };
  // Errors: INTERNAL/STORE_ERROR.
  absl::StatusOr<StatusReport> Status();

  // Logs (engine_streams.cc, LogFeed). A follow emits retained lines, then live ones, until the
  // agent leaves running (then `end` gets OK and an end note was emitted) or StopFollow.
  // Errors: NOT_FOUND, INVALID_ARGUMENT for a bad filter.
  absl::Status ReadLogs(const std::string& name, const logs::LogQuery& query,
                        google::protobuf::RepeatedPtrField<v1::LogLine>* lines);
  using Emit = LogFeed::Emit;
  // Errors: RESOURCE_EXHAUSTED/LIMIT_REACHED, NOT_FOUND.
  absl::StatusOr<uint64_t> StartFollow(const std::string& name, const logs::LogQuery& query,
                                       bool no_retained, Emit emit,
                                       std::function<void(absl::Status)> end);
  void StopFollow(uint64_t id);

  // Events (engine_streams.cc, EventFeed): replay from a cursor, then live, in commit order.
  // `subscriber.emit` returns false when the subscriber cannot take more (it is then told it
  // lagged and the stream ends). Errors: RESOURCE_EXHAUSTED/LIMIT_REACHED, NOT_FOUND for an
  // unknown instance filter.
  absl::StatusOr<uint64_t> Subscribe(EventFeed::Subscriber subscriber);
  void Unsubscribe(uint64_t id);

  // Audit (EventFeed): one `audit uid=… rpc=… instance=… result=…` log line and one
  // persisted `audit` event per mutating call, whatever its outcome. `instance` may be empty.
  void Audit(uint32_t uid, std::string_view rpc, const std::string& instance,
             const absl::Status& outcome);

  // Telemetry (engine_metrics.cc): everything the metrics endpoint shows but the API request
  // counts and the daemon's own process figures, read in one go on the owner thread. The
  // agents' process trees are not sampled here (that reads /proc): `roots` says where they
  // are, for telemetry::FillResources on the metrics thread.
  absl::Status CollectMetrics(telemetry::MetricsSnapshot* snapshot,
                              std::vector<telemetry::TreeRoot>* roots);

  // Applies new operator limits (owner thread). Existing instances and streams are kept even
  // when they exceed a lowered limit; only new ones are refused.
  void SetLimits(const EngineLimits& limits);
  const EngineLimits& limits() const { return limits_; }

  // What keeps the daemon from doing its job (owner thread; see Health). The daemon sets the
  // observer that mirrors it into the gRPC health service before Start().
  Health& health() { return health_; }

  // The bound metrics endpoint, shown by GetStatus ("" = off). Set before Start().
  void set_metrics_address(std::string address) { metrics_address_ = std::move(address); }
  const std::string& metrics_address() const { return metrics_address_; }

  const DaemonPaths& paths() const { return paths_; }
  int64_t started_at_ms() const { return started_at_ms_; }

 private:
  Engine(DaemonPaths paths, std::unique_ptr<store::Store> store,
         std::shared_ptr<spdlog::logger> logger, EngineSeams seams);
  // Sets view->resources from the row's live process tree, if any (reads /proc).
  void FillResourcesOf(const store::InstanceRow& row, v1::AgentInstance* view) const;
  void OnTransition(const store::InstanceRow& row, supervisor::State from, supervisor::State to);
  // After a removal: the instance's proxy listener and metrics go with it.
  void Forget(const std::string& name);
  // Copies the process backend's problem (a missing shim) into health_.
  void SyncLaunchHealth();
  // Reports a metering-proxy connection flood (a cap reached within the last minute), and the
  // live instances whose proxy could not be re-opened after a daemon restart (`rows`: every
  // instance; an entry goes once its proxy listens again or the instance is no longer live).
  void SyncProxyHealth(const std::vector<store::InstanceRow>& rows);
  // Re-adopted instances whose proxy could not be re-opened on its port, with the reason: their
  // model calls fail, or reach whatever took the port, until they restart, stop or go.
  std::map<std::string, std::string> unopened_proxies_;
  // Sets the daemon's health from unopened_proxies_ (degraded while there is one).
  void ReportUnopenedProxies();
  Health health_;
  // Running totals of persisted events per type, advanced by CollectMetrics from this cursor.
  std::map<std::string, uint64_t> event_counts_;
  int64_t event_counts_cursor_ = 0;
  bool event_counts_loaded_ = false;  // the store's pruned counts are in event_counts_
  // Counts the events appended since event_counts_cursor_ (all of them, and the pruned, the first
  // time): before a prune, so that no event goes uncounted between two scrapes.
  absl::Status AdvanceEventCounts();
  std::string metrics_address_;
  // gen_ai.client.token.usage of the engine-observed calls since the daemon started, by
  // (instance, provider, operation, token type, request model); fed by RecordObservedCalls.
  // At most kMaxGenAiModels distinct models per instance; calls of further models are observed
  // as kOtherGenAiModel (the model comes from the agent's requests: bounded, as every label is).
  using GenAiKey = std::tuple<std::string, std::string, std::string, std::string, std::string>;
  static constexpr size_t kMaxGenAiModels = 32;
  static constexpr const char* kOtherGenAiModel = "other";
  std::map<GenAiKey, telemetry::TokenHistogram> genai_;
  void ObserveGenAi(const std::string& name, const std::vector<metering::CallRecord>& records);

  EngineLimits limits_;
  // RESOURCE_EXHAUSTED/LIMIT_REACHED when a new stream would exceed limits_.max_streams.
  absl::Status CheckStreamLimit() const;

  // At start, after reconciliation and before any RPC: takes the pause/stop of every breach
  // committed before the daemon died (pending in the store), or clears it when the run is over.
  void ResumePendingBudgetActions();
  // Retention (engine_retention.cc): one bounded batch per log and the ledger, then again at
  // once while there is more, else after the policy's interval.
  void ScheduleRetention(std::chrono::seconds delay);
  void PruneOnce();
  // Test-only crash points (KTESIO_TEST_CRASH_POINT=<point>): _exit(99) there.
  void CrashPointForTests(std::string_view point) const;
  // Acts on the first breach committed with a batch of usage (pause/stop/warn), if any.
  void ActOnBreaches(const store::InstanceRow& row, int64_t run,
                     const std::vector<budget::Breach>& breaches, const budget::Limits& limits);

  // Engine-observed metering (engine_metering.cc): the start-time delivery with the proxy URL,
  // the proxy's call records, and re-listening for re-adopted agents.
  absl::StatusOr<supervisor::Delivery> DeliverFor(const store::InstanceRow& row,
                                                  const v1::AdapterSnapshot& snapshot);
  // Whether DeliverFor would succeed now, opening and writing nothing.
  absl::Status Deliverable(const store::InstanceRow& row,
                           const v1::AdapterSnapshot& snapshot) const;
  // The provider an engine-observed instance's proxy forwards to (metering.upstream_base_url);
  // CONFIG_INVALID when it is unset or malformed.
  absl::StatusOr<metering::Upstream> UpstreamFor(const store::InstanceRow& row) const;
  void ReopenProxies();
  std::string ProxyUrl(const std::string& name) const;
  ProxyKey proxy_key_;  // derives each instance's proxy path prefix (proxy_path.h)

  DaemonPaths paths_;
  int64_t started_at_ms_ = 0;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<store::Store> store_;
  registry::Registry registry_;
  ConfigBridge config_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  EventFeed events_{store_.get(), log_};  // after store_ and log_
  LogFeed logs_{io_};                     // after io_: its follows watch through it
  boost::asio::steady_timer retention_timer_{io_};
  std::unique_ptr<time::Clock> clock_;                // after io_: built on it
  std::unique_ptr<process::ProcessBackend> backend_;  // likewise
  // What the owners below share (after clock_: built on it).
  OwnerContext Owners() { return {store_.get(), &config_, clock_.get(), &health_, log_}; }
  UsageMeter usage_{
      io_,
      Owners(),
      {[this] { events_.Publish(); },
       [this](const store::InstanceRow& row, int64_t run,
              const std::vector<budget::Breach>& breaches, const budget::Limits& limits) {
         ActOnBreaches(row, run, breaches, limits);
       }}};  // after clock_
  CallRecorder calls_{
      Owners(),
      {[this](std::function<void()> work) { Post(std::move(work)); },
       [this](const store::InstanceRow& row, const std::vector<metering::CallRecord>& records,
              bool any_known) {
         if (any_known) {
           events_.Publish();
         }
         ObserveGenAi(row.name, records);
       },
       [this](const store::InstanceRow& row, int64_t run,
              const std::vector<budget::Breach>& breaches, const budget::Limits& limits) {
         ActOnBreaches(row, run, breaches, limits);
       }}};  // after clock_; before proxy_, which queues into it
  supervisor::Supervisor supervisor_;
  Instances instances_{Owners(),
                       registry_,
                       {[this](const std::string& name) { return ProxyUrl(name); },
                        [this](const store::InstanceRow& row, v1::AgentInstance* view) {
                          FillResourcesOf(row, view);
                        }}};
  Configuration configuration_{
      *store_, config_, registry_, [this](const std::string& name) { return ProxyUrl(name); },
      [this](const std::string& name) { supervisor_.ConfigChanged(name); }};
  Lifecycle lifecycle_{*store_, registry_, supervisor_, {[this](const std::string& name) {
                         Forget(name);
                       }}};  // after supervisor_
  std::thread thread_;
  // Declared last: destroyed first, so no proxy callback outlives what it posts to.
  std::unique_ptr<metering::MeteringProxy> proxy_;
};

}  // namespace ktesio::daemon::engine
