#pragma once

// The server-streaming SubscribeEvents call.

#include <atomic>

#include "api/queued_writer.h"
#include "ktesio/v1/events.grpc.pb.h"

namespace ktesio::daemon::api {

class SubscribeEventsReactor final : public QueuedWriter<v1::SubscribeEventsResponse> {
 public:
  SubscribeEventsReactor(ApiContext& api, grpc::CallbackServerContext* ctx,
                         const v1::SubscribeEventsRequest& request);

 protected:
  void Stopped() override;

 private:
  ApiContext& api_;
  std::atomic<uint64_t> subscription_id_{0};
};

}  // namespace ktesio::daemon::api
