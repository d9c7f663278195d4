#pragma once

// Pushes the daemon's metrics to an OpenTelemetry collector over OTLP/HTTP (JSON), every
// `interval`, on a thread of its own. One export is in flight at a time and a failed one is not
// retried (the next carries cumulative figures, so nothing is lost): a collector that is down
// costs one pending request's memory and a warning — the first failure and then at most one a
// minute, with a count, and an info line when exports succeed again. Header values never reach a
// log line.
//
// Thread-safety: construct and destroy from one thread; `collect` runs on the exporter thread.

#include <functional>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "spdlog/logger.h"
#include "telemetry/metrics.h"
#include "telemetry/otlp_config.h"

namespace ktesio::daemon::telemetry {

class OtlpExporter {
 public:
  // A snapshot to export, or nullopt to skip this round (the engine did not answer in time).
  using Collect = std::function<std::optional<MetricsSnapshot>()>;

  // Starts exporting per `config` (which must be enabled). Errors: INVALID_ARGUMENT when the TLS
  // trust store cannot be set up.
  static absl::StatusOr<std::unique_ptr<OtlpExporter>> Start(OtlpConfig config, Collect collect,
                                                             std::shared_ptr<spdlog::logger> log);
  ~OtlpExporter();  // stops the thread; an export in flight is abandoned

  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  struct Impl;

 private:
  explicit OtlpExporter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ktesio::daemon::telemetry
