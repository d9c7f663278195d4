#include "daemon/metrics.h"
#include "ktesio/contract/status_macros.h"

#include <chrono>
#include <optional>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ktesio::daemon {
namespace {

constexpr auto kEngineWait = std::chrono::seconds(5);
constexpr auto kMinScrapeAge = std::chrono::milliseconds(200);

// Runs `fn` on the engine thread and waits up to `timeout` for its result; nullopt when the
// engine did not run it in time (the result is then dropped when it comes).
template <typename T, typename Fn>
std::optional<T> OnEngine(engine::Engine& engine, Fn fn, std::chrono::milliseconds timeout) {
  struct Slot {
    absl::Mutex mu;
    std::optional<T> value ABSL_GUARDED_BY(mu);
  };
  auto slot = std::make_shared<Slot>();
  engine.Post([slot, fn = std::move(fn)]() mutable {
    T value = fn();
    absl::MutexLock lock(&slot->mu);
    slot->value = std::move(value);
  });
  Slot& waiting = *slot;
  absl::MutexLock lock(&waiting.mu);
  waiting.mu.AwaitWithTimeout(
      absl::Condition(
          +[](std::optional<T>* value) { return value->has_value(); }, &waiting.value),
      absl::FromChrono(timeout));
  return std::move(waiting.value);
}

}  // namespace

std::optional<telemetry::MetricsSnapshot> CollectSnapshot(engine::Engine& engine,
                                                          const api::RequestCounter& requests,
                                                          spdlog::logger& log) {
  struct Collected {
    absl::Status status;
    telemetry::MetricsSnapshot snapshot;
    std::vector<telemetry::TreeRoot> roots;
  };
  std::optional<Collected> collected = OnEngine<Collected>(
      engine,
      [&engine] {
        Collected c;
        c.status = engine.CollectMetrics(&c.snapshot, &c.roots);
        return c;
      },
      kEngineWait);
  if (!collected.has_value()) {
    log.warn("metrics: the engine did not answer within {} s", kEngineWait.count());
    return std::nullopt;
  }
  if (!collected->status.ok()) {
    log.warn("metrics: reading the figures failed: {}", std::string(collected->status.message()));
    return std::nullopt;
  }
  telemetry::FillResources(collected->roots, &collected->snapshot.agents);
  collected->snapshot.api_requests = requests.Snapshot();
  collected->snapshot.self = telemetry::SampleSelf();
  return std::move(collected->snapshot);
}

absl::StatusOr<std::unique_ptr<telemetry::MetricsServer>> StartMetrics(
    const std::string& listen, engine::Engine& engine, const api::RequestCounter& requests,
    std::shared_ptr<spdlog::logger> log) {
  KT_ASSIGN_OR_RETURN(telemetry::ListenAddress address, telemetry::ParseListenAddress(listen));
  telemetry::MetricsServer::Handlers handlers;
  // Scrapes closer together than kMinScrapeAge share one rendering, so a flood of scrapes costs
  // the engine at most a few reads a second. (Handlers run on the metrics thread only.)
  struct Cache {
    std::string text;
    std::chrono::steady_clock::time_point at;
  };
  auto cache = std::make_shared<Cache>();
  handlers.metrics = [&engine, &requests, log, cache]() -> std::optional<std::string> {
    const auto now = std::chrono::steady_clock::now();
    if (!cache->text.empty() && now - cache->at < kMinScrapeAge) {
      return cache->text;
    }
    std::optional<telemetry::MetricsSnapshot> snapshot = CollectSnapshot(engine, requests, *log);
    if (!snapshot.has_value()) {
      return std::nullopt;
    }
    cache->text = telemetry::RenderPrometheus(*snapshot);
    cache->at = std::chrono::steady_clock::now();
    return cache->text;
  };
  handlers.healthy = [&engine] {
    return OnEngine<bool>(
               engine, [] { return true; }, kEngineWait)
        .has_value();
  };
  absl::StatusOr<std::unique_ptr<telemetry::MetricsServer>> server =
      telemetry::MetricsServer::Start(address, std::move(handlers), log);
  if (!server.ok()) {
    return server.status();
  }
  log->info("metrics endpoint listening on {} (GET /metrics, GET /healthz)", (*server)->address());
  if (address.kind == telemetry::ListenAddress::Kind::kTcp && !address.loopback) {
    log->warn(
        "metrics endpoint {} is reachable from the network: anyone who can reach it reads "
        "agent names, usage and spend; prefer loopback or unix: and a scraping proxy",
        (*server)->address());
  }
  return server;
}

}  // namespace ktesio::daemon
