#pragma once

// Counts finished API calls by RPC and gRPC status code for `ktesio_api_requests_total`, through
// a server interceptor, so every RPC (unary and streaming, health and reflection included) is
// counted in one place. The RPC label set is bounded: past kMaxRpcs distinct method names (a
// hostile client can send any), further ones are counted as "other".
//
// Thread-safety: thread-safe.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/server_interceptor.h"
#include "telemetry/metrics.h"

namespace ktesio::daemon::api {

class RequestCounter {
 public:
  static constexpr size_t kMaxRpcs = 128;

  // `method` as gRPC names it ("/ktesio.v1.AgentService/StartAgent").
  void Count(std::string_view method, grpc::StatusCode code);
  std::vector<telemetry::ApiRequestCount> Snapshot() const;
  // What the idle memory trim watches, lock-free. The interceptor calls CallStarted when a call
  // arrives and CallEnded when it is gone; InFlight counts calls (streams included) between.
  uint64_t InFlight() const { return in_flight_.load(std::memory_order_relaxed); }
  void CallStarted() {
    started_.fetch_add(1, std::memory_order_relaxed);
    in_flight_.fetch_add(1, std::memory_order_relaxed);
  }
  void CallEnded() { in_flight_.fetch_sub(1, std::memory_order_relaxed); }
  // Calls that have arrived so far.
  uint64_t Started() const { return started_.load(std::memory_order_relaxed); }

  // An interceptor factory feeding this counter, for ServerBuilder::experimental().
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> Factory();

 private:
  std::atomic<uint64_t> started_{0};
  std::atomic<uint64_t> in_flight_{0};
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> counts_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, bool> rpcs_ ABSL_GUARDED_BY(mu_);
};

// "OK", "NOT_FOUND", ... as gRPC spells its codes.
const char* StatusCodeName(grpc::StatusCode code);

}  // namespace ktesio::daemon::api
