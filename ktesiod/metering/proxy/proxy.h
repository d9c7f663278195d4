#pragma once

// The engine-observed metering proxy: one loopback HTTP listener per engine-observed instance
// (127.0.0.1, ephemeral port), forwarding every method and path to the instance's upstream
// (http or https) and reporting, per model call, the provider-reported usage — or that it was
// absent. Streaming responses are relayed chunk by chunk as they arrive.
//
// Built on Boost.Beast over Asio with C++20 coroutines, on ONE thread of its own: the engine
// thread is never blocked by model traffic, and the proxy never touches the store — the outcomes
// of the calls that finished within one report window are handed to `on_call` together, which
// the engine posts to its own thread.
//
// Nothing about a request is logged but its instance, method class, status and usage: never a
// body, a header or a URL (credentials travel in all three).
//
// Thread-safety: Open/Close/Port are thread-safe; `on_call` runs on the proxy thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "metering/proxy/admission.h"
#include "metering/proxy/upstream.h"
#include "metering/usage_extract.h"
#include "spdlog/logger.h"
#include "telemetry/histogram.h"

namespace ktesio::daemon::metering {

struct ProxyOptions {
  size_t max_request_bytes = 32u << 20;  // larger request bodies get 413
  std::string ca_file;                   // extra trust anchors for https upstreams
  std::chrono::milliseconds connect_timeout{30'000};
  std::chrono::milliseconds idle_timeout{600'000};  // silence in either direction → close
  // A request head (or, on a kept-alive connection, the next one) must arrive within this.
  std::chrono::milliseconds header_timeout{30'000};
  AdmissionLimits admission;  // connection caps (admission.h)
  // Call records reach `on_call` in batches `report_window` late; while the proxy finishes many
  // calls per window the window widens, so they are at most `report_window_max` late (budgets
  // see usage this late; report_window.h).
  std::chrono::milliseconds report_window{2};
  std::chrono::milliseconds report_window_max{10};
  // Linux: the proxy thread runs under SCHED_BATCH, so a request or response that wakes it does
  // not preempt the process that sent it (docs/metering.md "Scheduling"); false keeps the
  // daemon's own policy (metering_relay_scheduling = "normal").
  bool batch_scheduling = true;
};

struct CallRecord {
  std::string instance;
  ApiShape shape = ApiShape::kOther;
  bool known = false;  // false: a model call whose usage was absent or cut off
  TokenUsage usage;
  unsigned status = 0;
  std::string model;  // the request's "model" when known (RequestPlan::model), else ""
};

// What the proxy measured for one instance since the daemon started (for the metrics endpoint).
struct ProxyInstanceStats {
  // Time the proxy itself added before a response's first byte reached the agent: from the
  // complete request to the start of the upstream write (connecting excluded), plus from the
  // arrival of the response bytes to their first write to the agent. One per relayed response.
  telemetry::LatencyHistogram added_before_first_byte;
  // Upstream failures by reason: "resolve", "connect", "tls", "write", "response_head" (each
  // answered with 502 unless a retry on a fresh connection succeeded) and "cut" (a response cut
  // off after it began).
  std::map<std::string, uint64_t> upstream_errors;
};

class MeteringProxy {
 public:
  // Receives the records of the calls that finished within one report window, in the order they
  // finished (one call per batch, not per record: each call is a cross-thread hand-over).
  using OnCall = std::function<void(std::vector<CallRecord>)>;

  // Starts the proxy thread. Errors: INVALID_ARGUMENT when `options.ca_file` cannot be loaded.
  static absl::StatusOr<std::unique_ptr<MeteringProxy>> Create(ProxyOptions options, OnCall on_call,
                                                               std::shared_ptr<spdlog::logger> log);
  ~MeteringProxy();  // closes every listener and connection, joins the thread

  MeteringProxy(const MeteringProxy&) = delete;
  MeteringProxy& operator=(const MeteringProxy&) = delete;

  // Opens the listener of `instance` (or re-points an open one at `upstream`) and returns its
  // port. `port` != 0 asks for that port (a re-adopted agent's URL names it); when it is taken,
  // `exact` decides between failing (UNAVAILABLE) and an ephemeral port.
  // `path_prefix` ("/kt-<secret>", or "" for none): only requests whose target starts with it
  // are served (it is stripped before forwarding); others get 403 and are neither forwarded nor
  // metered, so a local process that does not know the agent's base URL cannot spend its budget.
  absl::StatusOr<uint16_t> Open(const std::string& instance, const Upstream& upstream,
                                uint16_t port, bool exact, std::string path_prefix = "");
  // Closes the listener of `instance` and its connections. Idempotent.
  void Close(const std::string& instance);
  // After a pause/stop budget breach: model calls of `instance` get 429 (kBudgetBody) instead
  // of reaching the provider, until Unblock (the operator resumed it) or the listener closes.
  void Block(const std::string& instance);
  void Unblock(const std::string& instance);
  // The port of an open listener, 0 when none.
  uint16_t Port(const std::string& instance) const;
  // The path prefix of an open listener ("" when none or no listener).
  std::string PathPrefix(const std::string& instance) const;
  // Connection caps and refusals (daemon status, metrics).
  Admission::Pressure Pressure() const;
  // A copy of the measurements of every instance that had traffic (kept while the listener
  // closes and reopens; dropped by Forget when the instance is removed).
  std::map<std::string, ProxyInstanceStats> Stats() const;
  void Forget(const std::string& instance);

  struct Impl;

 private:
  explicit MeteringProxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The fixed body of a 502: names neither the upstream nor any credential.
inline constexpr std::string_view kBadGatewayBody =
    R"({"error":{"type":"upstream_unreachable","message":"ktesio metering proxy: the upstream )"
    R"(provider could not be reached"}})";
inline constexpr std::string_view kBudgetBody =
    R"({"error":{"type":"budget_exceeded","message":"ktesio: this agent's budget is )"
    R"(exhausted; model calls are refused until it is resumed or restarted"}})";
inline constexpr std::string_view kForbiddenBody =
    R"({"error":{"type":"forbidden","message":"ktesio metering proxy: this path is not the )"
    R"(agent's base URL"}})";
inline constexpr std::string_view kMethodNotAllowedBody =
    R"({"error":{"type":"method_not_allowed","message":"ktesio metering proxy: CONNECT is not )"
    R"(served: the proxy forwards to its one upstream"}})";
inline constexpr std::string_view kBadRequestBody =
    R"({"error":{"type":"bad_request","message":"ktesio metering proxy: the request is not )"
    R"(valid HTTP/1.1"}})";
inline constexpr std::string_view kTransferCodingBody =
    R"({"error":{"type":"bad_request","message":"ktesio metering proxy: the request's )"
    R"(Transfer-Encoding does not end in one chunked coding"}})";
inline constexpr std::string_view kUnsupportedCodingBody =
    R"({"error":{"type":"not_implemented","message":"ktesio metering proxy: request bodies )"
    R"(are relayed with no transfer coding but chunked"}})";
inline constexpr std::string_view kHeadersTooLargeBody =
    R"({"error":{"type":"request_header_too_large","message":"ktesio metering proxy: the )"
    R"(request's header exceeds the proxy's limit"}})";
inline constexpr std::string_view kTooLargeBody =
    R"({"error":{"type":"request_too_large","message":"ktesio metering proxy: the request )"
    R"(body exceeds the proxy's limit"}})";

}  // namespace ktesio::daemon::metering
