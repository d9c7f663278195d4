#include "api/request_counter.h"

namespace ktesio::daemon::api {
namespace {

namespace exp = grpc::experimental;

class CountingInterceptor final : public exp::Interceptor {
 public:
  // One interceptor lives as long as its call: from its arrival to its end, whichever way it
  // ends (finished, cancelled, the client gone), so the calls in flight are counted here.
  CountingInterceptor(exp::ServerRpcInfo* info, RequestCounter* counter)
      : info_(info), counter_(counter) {
    counter_->CallStarted();
  }
  ~CountingInterceptor() override { counter_->CallEnded(); }
  CountingInterceptor(const CountingInterceptor&) = delete;
  CountingInterceptor& operator=(const CountingInterceptor&) = delete;

  void Intercept(exp::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(exp::InterceptionHookPoints::PRE_SEND_STATUS)) {
      counter_->Count(info_->method() == nullptr ? "" : info_->method(),
                      methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  exp::ServerRpcInfo* info_;
  RequestCounter* counter_;
};

class CountingFactory final : public exp::ServerInterceptorFactoryInterface {
 public:
  explicit CountingFactory(RequestCounter* counter) : counter_(counter) {}
  exp::Interceptor* CreateServerInterceptor(exp::ServerRpcInfo* info) override {
    return new CountingInterceptor(info, counter_);
  }

 private:
  RequestCounter* counter_;
};

}  // namespace

const char* StatusCodeName(grpc::StatusCode code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  const int index = static_cast<int>(code);
  return index >= 0 && index < static_cast<int>(std::size(kNames)) ? kNames[index] : "UNKNOWN";
}

void RequestCounter::Count(std::string_view method, grpc::StatusCode code) {
  std::string rpc(method.substr(method.empty() || method.front() != '/' ? 0 : 1));
  absl::MutexLock lock(&mu_);
  if (!rpcs_.contains(rpc)) {
    if (rpcs_.size() >= kMaxRpcs) {
      rpc = "other";
    }
    rpcs_[rpc] = true;
  }
  counts_[{rpc, static_cast<int>(code)}] += 1;
}

std::vector<telemetry::ApiRequestCount> RequestCounter::Snapshot() const {
  absl::MutexLock lock(&mu_);
  std::vector<telemetry::ApiRequestCount> out;
  out.reserve(counts_.size());
  for (const auto& [key, count] : counts_) {
    out.push_back({key.first, StatusCodeName(static_cast<grpc::StatusCode>(key.second)), count});
  }
  return out;
}

std::unique_ptr<exp::ServerInterceptorFactoryInterface> RequestCounter::Factory() {
  return std::make_unique<CountingFactory>(this);
}

}  // namespace ktesio::daemon::api
