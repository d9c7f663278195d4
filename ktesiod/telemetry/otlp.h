#pragma once

// The OTLP/HTTP JSON body (ExportMetricsServiceRequest) of one export: the same figures as the
// Prometheus endpoint, as OpenTelemetry metrics (cumulative temporality since the daemon
// started), plus gen_ai.client.token.usage of the OpenTelemetry GenAI semantic conventions for
// the calls seen by the metering proxy. Pure: no I/O.

#include <cstdint>
#include <string>

#include "telemetry/metrics.h"
#include "telemetry/otlp_config.h"

namespace ktesio::daemon::telemetry {

// The semantic-conventions version the GenAI metric follows (docs/fleet.md).
inline constexpr const char* kGenAiSemconvVersion = "1.37.0";

// `now_unix_ns`: the data points' time. The start time of every cumulative point is the
// daemon's start.
std::string RenderOtlpJson(const MetricsSnapshot& snapshot, const OtlpConfig& config,
                           int64_t now_unix_ns);

}  // namespace ktesio::daemon::telemetry
