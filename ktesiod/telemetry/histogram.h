#pragma once

// Fixed-bucket histograms as Prometheus and OpenTelemetry expose them (explicit upper bounds,
// per-bucket counts, sum, count). Header-only and dependency-free so any module can record into
// one.
//
// Thread-safety: none; owners guard it.

#include <array>
#include <cstdint>
#include <iterator>

namespace ktesio::daemon::telemetry {

// Latencies in seconds: 100 µs to 1 s, then +Inf.
inline constexpr std::array<double, 12> kLatencyBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0};

// Tokens per model call: the boundaries the OpenTelemetry GenAI semantic conventions advise for
// gen_ai.client.token.usage.
inline constexpr std::array<double, 14> kTokenBuckets = {
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864};

template <const auto& kBounds>
struct FixedHistogram {
  static constexpr const auto& bounds = kBounds;
  std::array<uint64_t, std::size(kBounds) + 1> counts{};  // per bucket, not cumulative; last: +Inf
  double sum = 0;
  uint64_t count = 0;

  void Observe(double value) {
    size_t i = 0;
    while (i < std::size(kBounds) && value > kBounds[i]) {
      ++i;
    }
    counts[i] += 1;
    sum += value;
    count += 1;
  }
};

using LatencyHistogram = FixedHistogram<kLatencyBuckets>;
using TokenHistogram = FixedHistogram<kTokenBuckets>;

}  // namespace ktesio::daemon::telemetry
