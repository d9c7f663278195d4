#pragma once

// A fixed-bucket latency histogram in seconds, as Prometheus exposes one (cumulative `le`
// buckets, `_sum`, `_count`). Header-only and dependency-free so any module can record into one.
//
// Thread-safety: none; owners guard it.

#include <array>
#include <cstdint>

namespace ktesio::daemon::telemetry {

// Upper bounds, in seconds: 100 µs to 1 s, then +Inf.
inline constexpr std::array<double, 12> kLatencyBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0};

struct LatencyHistogram {
  std::array<uint64_t, kLatencyBuckets.size() + 1>
      counts{};  // per bucket (not cumulative); last: +Inf
  double sum = 0;
  uint64_t count = 0;

  void Observe(double seconds) {
    size_t i = 0;
    while (i < kLatencyBuckets.size() && seconds > kLatencyBuckets[i]) {
      ++i;
    }
    counts[i] += 1;
    sum += seconds;
    count += 1;
  }
};

}  // namespace ktesio::daemon::telemetry
