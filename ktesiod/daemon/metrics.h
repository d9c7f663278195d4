#pragma once

// Wires the metrics endpoint to the engine: a scrape takes one snapshot on the engine thread
// (bounded wait), samples the agents' process trees and the daemon's own figures on the metrics
// thread, and renders there.

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "api/request_counter.h"
#include "engine/engine.h"
#include "spdlog/logger.h"
#include "telemetry/metrics_server.h"

namespace ktesio::daemon {

// One snapshot of everything the daemon exports: the engine's part read on its thread (waiting
// at most 5 s: nullopt, with a warning, when it does not answer), then the agents' process trees,
// the API request counts and the daemon's own figures, on the calling thread.
std::optional<telemetry::MetricsSnapshot> CollectSnapshot(engine::Engine& engine,
                                                          const api::RequestCounter& requests,
                                                          spdlog::logger& log);

// Starts the endpoint on `listen` (already validated) and logs where it listens; warns when the
// address is reachable from the network. The server must be destroyed before `engine` stops.
absl::StatusOr<std::unique_ptr<telemetry::MetricsServer>> StartMetrics(
    const std::string& listen, engine::Engine& engine, const api::RequestCounter& requests,
    std::shared_ptr<spdlog::logger> log);

}  // namespace ktesio::daemon
