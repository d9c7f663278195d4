#pragma once

// The metrics endpoint: a small HTTP/1.1 server on a thread of its own, serving
//   GET /metrics   Prometheus text exposition (the handler renders a snapshot of the engine)
//   GET /healthz   200 "ok" while the engine answers, 503 otherwise
// and 404 for anything else. It reads no request body, has no mutating endpoint, bounds the
// request head (8 KiB), the time a client may take (10 s per request) and the number of open
// connections (64; more are closed at once). Off by default: see `metrics_listen`.
//
// Thread-safety: Start/Stop/address from one thread; handlers run on the metrics thread.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spdlog/logger.h"

namespace ktesio::daemon::telemetry {

struct ListenAddress {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  std::string ip;        // kTcp: an IPv4 or IPv6 literal
  uint16_t port = 0;     // kTcp: 0 picks a free port
  std::string path;      // kUnix: absolute
  bool loopback = true;  // kTcp: false when reachable from the network (the daemon warns)
};

// "127.0.0.1:9464", "[::1]:9464", "localhost:9464", "unix:/run/ktesio/metrics.sock", or any other
// "HOST:PORT" (e.g. "0.0.0.0:9464", "metrics.example:9464"). A host name (other than localhost)
// is resolved here, once, to its first address, which is what gets bound. Errors:
// INVALID_ARGUMENT naming what is wrong (a name that does not resolve included).
absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text);

class MetricsServer {
 public:
  struct Handlers {
    // The exposition text, or nullopt when the engine did not produce it in time (503).
    std::function<std::optional<std::string>()> metrics;
    // True while the engine answers.
    std::function<bool()> healthy;
  };

  // Binds `address` and starts serving. Errors: UNAVAILABLE when it cannot be bound (in use,
  // no permission), FAILED_PRECONDITION for a unix path that is not a socket.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const ListenAddress& address,
                                                              Handlers handlers,
                                                              std::shared_ptr<spdlog::logger> log);
  ~MetricsServer();  // stops serving, joins the thread, removes its unix socket file

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The bound address: "127.0.0.1:40123", "[::1]:9464", "unix:/path".
  const std::string& address() const { return bound_; }

  struct Impl;

 private:
  MetricsServer(std::unique_ptr<Impl> impl, std::string bound);
  std::unique_ptr<Impl> impl_;
  std::string bound_;
};

}  // namespace ktesio::daemon::telemetry
